//! Appending another store's log records verbatim (`strata migrate`): their headers as they
//! are, their bodies applied as `transact` applies them, their evicted bodies recorded as
//! evicted by the same transaction.

use super::*;
use crate::store::migrate::{ReplayOp, ReplayRecord};

impl RedbStore {
    /// Appends `records` in one commit as this store's next transactions (see
    /// [`Backend::append_log`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a record does not follow the head; as `transact`. Nothing
    /// is written then.
    pub fn append_log(&self, records: &[ReplayRecord]) -> Result<()> {
        let wtx = self.begin_write()?;
        {
            let mut w = WriteTables::open(&wtx)?;
            w.base_cache = Some(&self.base_cache);
            let mut head = match w.tx_log.last().db()? {
                Some((k, v)) => Some((k.value(), codec::decode_header(v.value(), "tx header")?)),
                None => None,
            };
            for record in records {
                match &head {
                    Some((tx, header)) => {
                        record.check_follows(*tx, &header.chain, Some(header.tx_time))?;
                    }
                    None => record.check_follows(0, &[0; 32], None)?,
                }
                let (tx, tx_time) = (record.tx, record.header.tx_time);
                // Its bodies as this store writes them (format 8): the header lists the
                // filesystems of their first writes, outside what the chain hashes.
                let mut header = record.header.clone();
                header.filesystems.clear();
                for (n, op) in record.ops.iter().enumerate() {
                    let n = n as u32;
                    match op {
                        ReplayOp::Body { op, put } => {
                            if let (OpRec::Write(write), Some(put)) = (&**op, put) {
                                let existing = entity_rec(&w, &write.entity)?;
                                let kept = put.kept.as_deref();
                                w.store_doc(&put.object, kept, None, existing.as_ref())?;
                            }
                            w.apply(tx, tx_time, n, op)?;
                            w.tx_ops
                                .insert(
                                    (tx, n),
                                    codec::encode_op_in(op, tx_time, &mut header.filesystems)?
                                        .as_slice(),
                                )
                                .db()?;
                        }
                        ReplayOp::Evicted { by } => {
                            w.evicted_ops.insert((tx, n), *by).db()?;
                        }
                    }
                }
                w.end_tx()?;
                w.tx_log
                    .insert(tx, codec::encode_header(&header)?.as_slice())
                    .db()?;
                w.finish()?;
                head = Some((tx, header));
            }
        }
        wtx.commit().db()
    }
}
