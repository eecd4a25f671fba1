//! [`Request`] and [`Response`]: every operation of the engine, by its method name, and the
//! [`Apply`] trait each request type implements in its group's file.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::Engine;
use super::admin::*;
use super::agent::*;
use super::index::*;
use super::objects::*;
use super::rescue::*;
use super::sessions::*;
use super::watch::*;
use crate::error::Result;
use crate::session::ResumeReport;

/// A request type: what it answers with, and how the engine answers it.
pub trait Apply: Into<Request> {
    /// The response to this request.
    type Response: Serialize + DeserializeOwned + schemars::JsonSchema;

    /// Answers the request.
    ///
    /// # Errors
    /// As the request type documents.
    fn apply(self, engine: &Engine) -> Result<Self::Response>;
}

/// Something that walks the method table with the types (the JSON Schemas of `schema/rpc/`).
pub(crate) trait VisitMethod {
    /// Visits method `method`, whose params are `R` and whose result is `R::Response`.
    fn visit<R: Apply + schemars::JsonSchema>(&mut self, method: &'static str);
}

/// Declares the method table: the [`Request`] and [`Response`] enums, the conversions, dispatch.
macro_rules! methods {
    ($( $method:literal => $variant:ident($request:ty) -> $response:ty; )*) => {
        /// Every request the engine answers, tagged by its method name: on the wire
        /// `{"method": "show", "params": {…}}`, the shape of a JSON-RPC 2.0 call.
        #[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum Request {
            $(
                #[doc = concat!("`", $method, "`.")]
                #[serde(rename = $method)]
                $variant($request),
            )*
        }

        /// The response to any [`Request`]: the variant of the same name.
        #[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
        #[serde(untagged)]
        pub enum Response {
            $(
                #[doc = concat!("The response to `", $method, "`.")]
                $variant($response),
            )*
        }

        impl Request {
            /// Every method name, in the order of the table.
            pub const METHODS: &'static [&'static str] = &[$($method),*];

            /// The method name of this request.
            pub fn method(&self) -> &'static str {
                match self {
                    $( Request::$variant(_) => $method, )*
                }
            }

            /// Whether answering this request may write to the store.
            pub fn writes(&self) -> bool {
                match self {
                    $( Request::$variant(r) => writes(r), )*
                }
            }

            /// Answers the request.
            pub(crate) fn apply_any(self, engine: &Engine) -> Result<Response> {
                match self {
                    $( Request::$variant(r) => r.apply(engine).map(Response::$variant), )*
                }
            }

            /// Calls `visitor` once per method, with its request type, in the order of the table.
            pub(crate) fn visit_methods(visitor: &mut impl VisitMethod) {
                $( visitor.visit::<$request>($method); )*
            }
        }

        $(
            impl From<$request> for Request {
                fn from(request: $request) -> Self {
                    Request::$variant(request)
                }
            }
        )*
    };
}

methods! {
    "ls" => Ls(LsRequest) -> Vec<LsRow>;
    "show" => Show(ShowRequest) -> ShowResponse;
    "cat" => Cat(CatRequest) -> CatResponse;
    "history" => History(HistoryRequest) -> HistoryResponse;
    "diff" => Diff(DiffRequest) -> DiffResponse;
    "log" => Log(LogRequest) -> LogResponse;
    "log.run" => LogRun(LogRunRequest) -> LogRun;
    "fsck" => Fsck(FsckRequest) -> FsckResponse;
    "backup" => Backup(BackupRequest) -> BackupResponse;
    "migrate" => Migrate(MigrateRequest) -> MigrateResponse;
    "gc" => Gc(GcRequest) -> GcResponse;
    "evict" => Evict(EvictRequest) -> EvictResponse;
    "stats" => Stats(StatsRequest) -> StatsResponse;
    "mount.ls" => MountLs(MountLsRequest) -> MountsResponse;
    "mount.add" => MountAdd(MountAddRequest) -> MountChanged;
    "mount.rm" => MountRm(MountRmRequest) -> MountChanged;
    "index" => Index(IndexRequest) -> IndexResponse;
    "session.new" => SessionNew(SessionNewRequest) -> Committed;
    "session.ls" => SessionLs(SessionLsRequest) -> Vec<String>;
    "session.show" => SessionShow(SessionShowRequest) -> SessionShown;
    "session.read" => SessionRead(SessionReadRequest) -> TouchedFiles;
    "session.discover" => SessionDiscover(SessionDiscoverRequest) -> TouchedFiles;
    "session.set" => SessionSet(SessionSetRequest) -> SetDone;
    "session.toolcall" => SessionToolcall(SessionToolcallRequest) -> ToolcallRecorded;
    "session.turn" => SessionTurn(SessionTurnRequest) -> TurnAppended;
    "session.render" => SessionRender(SessionRenderRequest) -> SessionRendered;
    "session.resume" => SessionResume(SessionResumeRequest) -> ResumeReport;
    "session.fork" => SessionFork(SessionForkRequest) -> Forked;
    "session.history" => SessionHistory(SessionHistoryRequest) -> SessionCommits;
    "agent.call" => AgentCall(AgentCallRequest) -> AgentCalled;
    "agent.tools" => AgentTools(AgentToolsRequest) -> AgentTools;
    "agent.entrypoints" => AgentEntrypoints(AgentEntrypointsRequest) -> AgentEntrypoints;
    "watch.add" => WatchAdd(WatchAddRequest) -> WatchRoots;
    "watch.rm" => WatchRm(WatchRmRequest) -> WatchRoots;
    "watch.ls" => WatchLs(WatchLsRequest) -> WatchRoots;
    "agent.approve" => AgentApprove(AgentApproveRequest) -> AgentCalled;
    "agent.audit" => AgentAudit(AgentAuditRequest) -> AgentAudit;
    "agent.push" => AgentPush(AgentPushRequest) -> AgentPushed;
    "agent.withdraw" => AgentWithdraw(AgentWithdrawRequest) -> AgentPushed;
}

/// Whether a request may write: every request type says so through this trait.
pub trait Writes {
    /// Whether answering may write to the store file (the front end opens it read-write then);
    /// the mount requests change only the settings file beside it.
    fn writes(&self) -> bool;
}

fn writes(request: &impl Writes) -> bool {
    request.writes()
}

/// Declares request types that only read.
macro_rules! reads_only {
    ($($request:ty),* $(,)?) => {
        $( impl Writes for $request { fn writes(&self) -> bool { false } } )*
    };
}

/// Declares request types that write.
macro_rules! may_write {
    ($($request:ty),* $(,)?) => {
        $( impl Writes for $request { fn writes(&self) -> bool { true } } )*
    };
}

reads_only!(
    BackupRequest,
    MigrateRequest,
    LsRequest,
    ShowRequest,
    CatRequest,
    HistoryRequest,
    DiffRequest,
    LogRequest,
    LogRunRequest,
    StatsRequest,
    MountLsRequest,
    MountAddRequest,
    MountRmRequest,
    SessionLsRequest,
    SessionShowRequest,
    SessionRenderRequest,
    SessionHistoryRequest,
    AgentToolsRequest,
    AgentAuditRequest,
    WatchAddRequest,
    WatchRmRequest,
    WatchLsRequest,
);

may_write!(
    GcRequest,
    EvictRequest,
    IndexRequest,
    SessionNewRequest,
    SessionReadRequest,
    SessionDiscoverRequest,
    SessionSetRequest,
    SessionToolcallRequest,
    SessionTurnRequest,
    SessionResumeRequest,
    SessionForkRequest,
    AgentCallRequest,
    AgentEntrypointsRequest,
    AgentApproveRequest,
    AgentPushRequest,
    AgentWithdrawRequest,
);

impl Writes for FsckRequest {
    fn writes(&self) -> bool {
        self.rebuild || self.repair
    }
}
