//! The PostgreSQL schema of a strata store, created and migrated by strata: one PostgreSQL schema
//! (namespace) per store, its tables in it, and `strata_meta.schema_version` saying which
//! version of this layout it holds. Only btree indexes, `bigint` (µs times, ids) and `bytea`
//! (ids, paths, hashes, records in the storage codec), so that it can run on Postgres-wire
//! engines unchanged.

/// The layout version this build creates and reads (1: the store; 2: the damage marker and
/// the head's header).
pub const SCHEMA_VERSION: i64 = 2;

/// The tables of layout version 1, made in an empty schema.
pub const CREATE_V1: &str = "
CREATE TABLE strata_meta (name text PRIMARY KEY, value bigint NOT NULL);
-- The one row every commit locks (FOR UPDATE): the latest tx id (0 in an empty store).
CREATE TABLE strata_head (id int PRIMARY KEY CHECK (id = 1), tx_id bigint NOT NULL);
-- The log, the source of truth: headers (codec TxHeaderRec: time, origin, digests, chain) and
-- op bodies (codec encode_op); an evicted body is removed and recorded in strata_evicted_ops.
CREATE TABLE strata_log (tx_id bigint PRIMARY KEY, header bytea NOT NULL);
CREATE TABLE strata_ops (tx_id bigint, n int, body bytea NOT NULL, PRIMARY KEY (tx_id, n));
CREATE TABLE strata_evicted_ops (tx_id bigint, n int, by_tx bigint NOT NULL, PRIMARY KEY (tx_id, n));
-- Entities by id (UTF-8 bytes, so bytewise order): dense number and codec EntityRec.
CREATE TABLE strata_entities (id bytea PRIMARY KEY, eid bigint NOT NULL UNIQUE, rec bytea NOT NULL);
-- Versions keyed (entity, valid_from µs, tx_id), and in tx order per entity.
CREATE TABLE strata_versions (
    eid bigint, valid_from bigint, tx_id bigint,
    object_hash bytea, rec bytea NOT NULL,
    PRIMARY KEY (eid, valid_from, tx_id));
CREATE INDEX strata_versions_by_tx ON strata_versions (eid, tx_id);
CREATE INDEX strata_versions_by_hash ON strata_versions (object_hash);
-- Match ops by the entity id they name (evict removes their bodies).
CREATE TABLE strata_matches (id bytea, tx_id bigint, n int, PRIMARY KEY (id, tx_id, n));
-- Files by (filesystem id, canonical path).
CREATE TABLE strata_paths (fs bytea, path bytea, eid bigint NOT NULL, PRIMARY KEY (fs, path));
-- Documents by object hash (codec DocRec), with the contents they use.
CREATE TABLE strata_docs (
    hash bytea PRIMARY KEY, content_hash bytea, kept_hash bytea, rec bytea NOT NULL);
CREATE INDEX strata_docs_by_content ON strata_docs (content_hash);
CREATE INDEX strata_docs_by_kept ON strata_docs (kept_hash);
-- Contents by SHA-256: the codec blob record cut into 1 MiB chunks.
CREATE TABLE strata_contents (hash bytea PRIMARY KEY, len bigint NOT NULL, chunks int NOT NULL);
CREATE TABLE strata_chunks (hash bytea, n int, data bytea NOT NULL, PRIMARY KEY (hash, n));
-- The indexer's stat cache (codec StatRec).
CREATE TABLE strata_stat (fs bytea, path bytea, rec bytea NOT NULL, PRIMARY KEY (fs, path));
INSERT INTO strata_head VALUES (1, 0);
INSERT INTO strata_meta VALUES ('put_bytes', 0);
";

/// The steps from each layout version to the next: `UPGRADES[v - 1]` makes version `v + 1` of a
/// version `v` store. A new store gets [`CREATE_V1`] and then every step.
pub const UPGRADES: &[&str] = &["
-- The damage marker (at most one row): why fsck or a read found the store damaged. Writes are
-- refused while it is there; `strata fsck --repair` (or a clean fsck) removes it.
CREATE TABLE strata_damage (
    id int PRIMARY KEY CHECK (id = 1), reason text NOT NULL, details text NOT NULL);
-- The head's log header beside its tx id, so that the statement taking the lock reads it (a
-- join with the log there would read the log as it was before the lock was waited for).
ALTER TABLE strata_head ADD COLUMN header bytea;
UPDATE strata_head SET header = (SELECT l.header FROM strata_log l WHERE l.tx_id = strata_head.tx_id);
"];

/// Bytes per content chunk.
pub const CHUNK: usize = 1 << 20;

use postgres::Client;

use super::{Cached as _, PgLocation, PgOpen, PgResult as _};
use crate::error::{Error, Result};

/// Makes sure the store's schema holds this layout: creates it (as `mode` allows) or upgrades
/// an older one, under an advisory lock so that two processes doing it at once do it once, and
/// refuses a layout version this build does not know. A read-only open changes nothing: it
/// reads an older layout as it is. The layout version found (or made).
///
/// # Errors
/// [`Error::NotFound`] when there is no store and `mode` is [`PgOpen::Open`] or
/// [`PgOpen::ReadOnly`]; [`Error::InvalidInput`] when there is one and `mode` is
/// [`PgOpen::Create`]; [`Error::FormatVersion`] for another layout version; [`Error::Storage`]
/// from the database.
pub fn prepare(client: &mut Client, location: &PgLocation, mode: PgOpen) -> Result<i64> {
    let schema = location.schema();
    let mut tx = client.transaction().pg("beginning the schema check")?;
    if mode != PgOpen::ReadOnly {
        tx.run("SELECT pg_advisory_xact_lock(hashtext($1))", &[&schema])
            .pg("locking the schema")?;
    }
    let exists: bool = tx
        .row(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND \
             tablename = 'strata_meta')",
            &[&schema],
        )
        .pg("looking for the store")?
        .get(0);
    let layout = match (exists, mode) {
        (false, PgOpen::Open | PgOpen::ReadOnly) => {
            return Err(Error::not_found(format!(
                "a strata store at {}; make one with `strata init --backend URL`",
                location.redacted()
            )));
        }
        (true, PgOpen::Create) => {
            return Err(Error::invalid_input(format!(
                "a strata store already exists at {}; open it, or name another schema \
                 (?schema=NAME)",
                location.redacted()
            )));
        }
        (false, _) => {
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {schema}; SET LOCAL search_path TO {schema}; \
                 {CREATE_V1}{}",
                UPGRADES.concat()
            ))
            .pg("creating the store's tables")?;
            tx.run(
                "INSERT INTO strata_meta VALUES ('schema_version', $1)",
                &[&SCHEMA_VERSION],
            )
            .pg("recording the schema version")?;
            SCHEMA_VERSION
        }
        (true, _) => {
            let found: i64 = tx
                .maybe_row(
                    &format!(
                        "SELECT value FROM {schema}.strata_meta WHERE name = 'schema_version'"
                    ),
                    &[],
                )
                .pg("reading the schema version")?
                .map_or(0, |row| row.get(0));
            if !(1..=SCHEMA_VERSION).contains(&found) {
                return Err(Error::FormatVersion {
                    path: location.redacted().into(),
                    found: u32::try_from(found).unwrap_or(u32::MAX),
                    supported: u32::try_from(SCHEMA_VERSION).unwrap_or(0),
                });
            }
            if found < SCHEMA_VERSION && mode != PgOpen::ReadOnly {
                let steps = usize::try_from(found - 1).unwrap_or(0);
                tx.batch_execute(&format!(
                    "SET LOCAL search_path TO {schema}; {}",
                    UPGRADES[steps..].concat()
                ))
                .pg("upgrading the store's tables")?;
                tx.run(
                    "UPDATE strata_meta SET value = $1 WHERE name = 'schema_version'",
                    &[&SCHEMA_VERSION],
                )
                .pg("recording the schema version")?;
                SCHEMA_VERSION
            } else {
                found
            }
        }
    };
    tx.commit().pg("committing the schema")?;
    Ok(layout)
}
