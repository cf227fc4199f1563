"""Type stubs of the extension module ``psikit._native`` (the Rust half).

Use the documented modules (:mod:`psikit.filter`, :mod:`psikit.he`,
:mod:`psikit.psi`, :mod:`psikit.cpsi`, :class:`psikit.Server`); this module's functions are
their building blocks and may change.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__version__: str
PSI_PROTOCOLS: List[str]

#: ``progress(stage, done, total)``: told each stage of a long call (``done``
#: 0) and its steps. Raising ``KeyboardInterrupt`` in it stops the call; other
#: exceptions are printed and the call goes on. Set-ups, builds and updates
#: also look for Ctrl-C (and the thread's :class:`Cancel`) at each report,
#: whether a callback is given or not.
Progress = Callable[[str, int, Optional[int]], None]

class PsikitError(Exception):
    """Base class of every error psikit raises."""

class InputError(PsikitError):
    """Bad input or arguments (missing column, key too long, unknown option, ...)."""

class ProtocolError(PsikitError):
    """The network or the peer failed (refused, closed, timeout, malformed, other settings)."""

class StaleFilterError(ProtocolError):
    """The server's filter (or HE database) changed while the client queried."""

class ParametersError(PsikitError):
    """Malformed, insecure or unusable protocol parameters."""

class Source:
    """Items for one call and how they become keys (the CLI's KeySpec)."""

    @staticmethod
    def csv(
        path: str,
        key: Sequence[str],
        normalize: str,
        has_header: bool = True,
        delimiter: str = ",",
        label: Sequence[str] = ...,
    ) -> Source: ...
    @staticmethod
    def columns(
        columns: Sequence[List[Any]],
        key_columns: int,
        normalize: str,
        label_columns: int = 0,
        strict: Optional[str] = None,
        label_names: Sequence[str] = (),
    ) -> Source: ...
    @property
    def key_format(self) -> str: ...

class MatchedFields:
    """The fields of a CSV source's matched rows, in one buffer (results
    hold it under ``"fields"``, next to ``"positions"``: the rows' 0-based
    data row numbers as native ``int64`` bytes, and ``"labels"``: one list
    per label column)."""

    def __len__(self) -> int: ...
    def row(self, i: int) -> List[str]: ...

class Cancel:
    """A cancellation token for the calls made on this thread inside
    ``with token:`` (used by the asyncio entries): network calls see it
    within 100 ms, set-ups and builds at their next progress report."""

    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...
    def __enter__(self) -> Cancel: ...
    def __exit__(self, *args: object) -> bool: ...

class Server:
    """psikit's server (filter and/or HE states) on one port, in the background,
    and at the message level (``respond``), with or without a port
    (``listen=None``)."""

    def __init__(
        self,
        listen: Optional[str] = "127.0.0.1:0",
        filter_state: Optional[str] = None,
        he_state: Optional[str] = None,
        he_cache: bool = True,
        he_router: Optional[str] = None,
        he_shards: Sequence[str] = ...,
        he_shards_tls: Optional[Dict[str, Any]] = None,
        max_connections: Optional[int] = None,
        max_query_items: Optional[int] = None,
        he_concurrent_queries: Optional[int] = None,
        reload_secs: float = 2.0,
        timeout: float = 60.0,
        max_message_mib: int = 16,
        tls: Optional[Dict[str, Any]] = None,
        query_budget: Optional[int] = None,
        query_budget_window: float = 86400.0,
        ws_listen: Optional[str] = None,
        ws_allow_origin: Sequence[str] = ...,
    ) -> None: ...
    @property
    def addr(self) -> Optional[str]: ...
    @property
    def ws_addr(self) -> Optional[str]: ...
    @property
    def services(self) -> List[Tuple[str, str]]: ...
    def respond(self, request: bytes) -> bytes: ...
    @property
    def running(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Server: ...
    def __exit__(self, *args: object) -> bool: ...

class FilterClient:
    """A filter client keeping its filter between calls (see psikit.filter.Client)."""

    def __init__(
        self,
        server: str,
        cache: Optional[str] = None,
        max_filter_mib: int = 4096,
        timeout: float = 60.0,
        max_message_mib: int = 16,
        tls: Optional[Dict[str, Any]] = None,
        tag_cache: Optional[str] = None,
    ) -> None: ...
    @property
    def server(self) -> str: ...
    @property
    def discarded_cache(self) -> Optional[str]: ...
    @property
    def discarded_tag_cache(self) -> Optional[str]: ...
    def sync(self) -> Dict[str, Any]: ...
    def query(self, source: Source, progress: Optional[Progress] = None) -> Dict[str, Any]: ...

class HeClient:
    """An HE client keeping parameters and keys between queries (see psikit.he.Client)."""

    def __init__(
        self,
        server: str,
        timeout: float = 60.0,
        max_message_mib: int = 16,
        tls: Optional[Dict[str, Any]] = None,
    ) -> None: ...
    @property
    def server(self) -> str: ...
    def query(
        self,
        source: Source,
        pad_to: Optional[int] = None,
        label_names: Sequence[str] = ...,
        progress: Optional[Progress] = None,
    ) -> Dict[str, Any]: ...

class Party:
    """One party at the message level, made by psi_party, he_query_party,
    filter_query_party or cpsi_party (see psikit.psi.Party, psikit.he.Query,
    psikit.filter.Query, psikit.cpsi.Party): every family's one
    message-level API."""

    def step(self, incoming: Optional[bytes] = None, peer_closed: bool = False) -> bytes: ...
    @property
    def done(self) -> bool: ...
    def result(self) -> Dict[str, Any]: ...

def psi_party(
    role: str,
    source: Source,
    protocol: str = "vole",
    malicious: bool = False,
    reveal: bool = False,
    max_peer_items: int = ...,
    max_message_mib: int = 16,
) -> Party: ...
def he_query_party(
    source: Source,
    pad_to: Optional[int] = None,
    label_names: Sequence[str] = ...,
    max_message_mib: int = 16,
) -> Party: ...
def filter_query_party(
    source: Source,
    cache: Optional[str] = None,
    max_filter_mib: int = 4096,
    max_message_mib: int = 16,
) -> Party: ...

def cpsi_party(
    application: str,
    role: str,
    source: Source,
    value_columns: Sequence[str] = ...,
    threshold: Optional[int] = None,
    reveal_to: str = "receiver",
    min_intersection: int = 0,
    inner_product: bool = False,
    product_bits: int = 32,
    ot: str = "silent",
    epc: str = "auto",
    max_peer_items: int = ...,
    max_message_mib: int = 16,
) -> Party: ...

def filter_setup(
    source: Source,
    state: str,
    fpr_bits: int = 30,
    bucket_size: int = 4,
    load: float = 0.9,
    force: bool = False,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def filter_update(
    state: str,
    add: Optional[Source] = None,
    remove: Optional[Source] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def filter_query(
    server: str,
    source: Source,
    cache: Optional[str] = None,
    max_filter_mib: int = 4096,
    timeout: float = 60.0,
    max_message_mib: int = 16,
    tls: Optional[Dict[str, Any]] = None,
    progress: Optional[Progress] = None,
    tag_cache: Optional[str] = None,
) -> Dict[str, Any]: ...
def he_build_db(
    source: Source,
    state: str,
    params: Optional[str] = None,
    max_label_bytes: Optional[int] = None,
    capacity: Optional[int] = None,
    client_items: int = 1024,
    goal: str = "time",
    fpp_bits: int = 40,
    force: bool = False,
    progress: Optional[Progress] = None,
    shards: Optional[int] = None,
) -> Dict[str, Any]: ...
def he_update_db(
    state: str,
    add: Optional[Source] = None,
    remove: Optional[Source] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def he_query(
    server: str,
    source: Source,
    pad_to: Optional[int] = None,
    label_names: Sequence[str] = ...,
    timeout: float = 60.0,
    max_message_mib: int = 16,
    tls: Optional[Dict[str, Any]] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def psi_run(
    role: str,
    source: Source,
    protocol: str = "vole",
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    malicious: bool = False,
    reveal: bool = False,
    max_peer_items: int = ...,
    accept_timeout: Optional[float] = None,
    timeout: float = 60.0,
    max_message_mib: int = 16,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def psi_job(
    role: str,
    source: Source,
    job_dir: str,
    protocol: str = "vole",
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    malicious: bool = False,
    reveal: bool = False,
    resume: bool = False,
    memory: int = ...,
    bucket_items: Optional[int] = None,
    max_peer_rows: int = ...,
    retry: float = 600.0,
    idle_timeout: float = 600.0,
    output: Optional[str] = None,
    accept_timeout: Optional[float] = None,
    max_message_mib: int = 16,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def cpsi_run(
    application: str,
    role: str,
    source: Source,
    value_columns: Sequence[str] = ...,
    threshold: Optional[int] = None,
    reveal_to: str = "receiver",
    min_intersection: int = 0,
    inner_product: bool = False,
    product_bits: int = 32,
    ot: str = "silent",
    epc: str = "auto",
    listen: Optional[str] = None,
    connect: Optional[str] = None,
    max_peer_items: int = ...,
    accept_timeout: Optional[float] = None,
    timeout: float = 60.0,
    max_message_mib: int = 16,
    tls: Optional[Dict[str, Any]] = None,
    on_listening: Optional[Callable[[str], None]] = None,
    progress: Optional[Progress] = None,
) -> Dict[str, Any]: ...
def oprf_stage_key(path: str) -> None: ...

class OprfWorker:
    """An OPRF key, loaded once, spooling the outputs of batches of rows per shard (see psikit.scale)."""

    def __init__(self, key_dir: str, shards: int, spool: str, name: str) -> None: ...
    def evaluate(self, source: Source) -> Tuple[int, int]: ...
    def flush(self) -> None: ...

def he_shard_plan(
    router_dir: str,
    shards: int,
    rows: int,
    longest: int,
    labeled: bool,
    key_format: str,
    max_label_bytes: Optional[int] = None,
    params: Optional[str] = None,
    client_items: int = 1024,
    goal: str = "time",
    fpp_bits: int = 40,
    label_columns: Sequence[str] = (),
) -> str: ...
def he_build_shard(plan: str, index: int, spool: str, dir: str) -> str: ...
def he_shard_finish(router_dir: str, plan: str, built: Sequence[str]) -> str: ...
def filter_setup_from_spool(
    spool: str,
    key_file: str,
    rows: int,
    key_format: str,
    state: str,
    fpr_bits: int = 30,
    bucket_size: int = 4,
    load: float = 0.90,
    force: bool = False,
) -> Dict[str, Any]: ...
def encode_keys(source: Source) -> List[Optional[bytes]]: ...
def reuse_freed_memory() -> None: ...

# Cluster jobs (psikit.scale.psi, psikit.scale.cpsi).

#: A part's summary: its digest, rows read, rows with a key, longest key.
PartSummary = Tuple[bytes, int, int, int]

class JobPlan:
    """What a cluster job runs and how its parts are read (built in every process)."""

def psi_plan(
    role: str, key: Sequence[str], normalize: str, delimiter: str = ",", protocol: str = "vole",
    malicious: bool = False, reveal: bool = False,
) -> JobPlan: ...
def cpsi_plan(
    application: str, role: str, key: Sequence[str], normalize: str, delimiter: str = ",",
    value_columns: Sequence[str] = (), threshold: Optional[int] = None, reveal_to: str = "receiver",
    min_intersection: int = 0, inner_product: bool = False, product_bits: int = 32, ot: str = "silent",
    epc: str = "auto",
) -> JobPlan: ...
def cluster_part_path(job_dir: str, part: int) -> str: ...
def cluster_spool_part(plan: JobPlan, job_dir: str, part: int, rows: str) -> PartSummary: ...
def cluster_run_buckets(
    plan: JobPlan, job_dir: str, buckets: List[int], connect: str, token: bytes, tls: Optional[Dict[str, Any]] = None,
    retry: float = 600.0, idle_timeout: float = 600.0, max_message_mib: int = 16,
) -> Dict[str, Any]: ...
def cluster_serve(
    plan: JobPlan, job_dir: str, relay: str, ticket: bytes, idle_timeout: float = 600.0, max_message_mib: int = 16,
) -> int: ...

class ClusterJob:
    """A cluster job's driver: the job directory, the link to the peer and, listening, the relay."""

    def __init__(
        self, plan: JobPlan, job_dir: str, listen: Optional[str] = None, connect: Optional[str] = None,
        tls: Optional[Dict[str, Any]] = None, relay_listen: str = "127.0.0.1:0", workers: int = 1,
        resume: bool = False, memory: int = ..., bucket_items: Optional[int] = None, max_peer_rows: int = ...,
        retry: float = 600.0, idle_timeout: float = 600.0, output: Optional[str] = None,
        max_message_mib: int = 16, on_listening: Optional[Callable[[str], None]] = None,
    ) -> None: ...
    def has_input(self) -> bool: ...
    def set_parts(self, parts: Sequence[Tuple[str, PartSummary]]) -> int: ...
    def check_parts(self) -> None: ...
    def step(self) -> Tuple[str, Any]: ...
    def bucket_token(self) -> Optional[Tuple[bytes, int]]: ...
    def relay(self) -> Optional[Tuple[str, bytes]]: ...
