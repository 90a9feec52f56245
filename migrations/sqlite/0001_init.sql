-- Webhook deliveries: the delivery id makes a redelivered webhook a no-op.
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    forge TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    event TEXT NOT NULL,
    repo TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    UNIQUE (forge, delivery_id)
);

-- The durable queue. Times are Unix milliseconds.
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    head_sha TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    run_after BIGINT NOT NULL,
    locked_by TEXT,
    heartbeat_at BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_claim ON jobs (status, run_after, id);
CREATE INDEX jobs_pull ON jobs (forge, repo, pr_number, kind, status);

-- Every planning run, whatever its outcome.
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id BIGINT,
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    base_ref TEXT NOT NULL,
    base_sha TEXT,
    head_sha TEXT NOT NULL,
    trigger TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    counts TEXT,
    alerts TEXT,
    timings TEXT,
    plan_json TEXT,
    comment TEXT,
    error TEXT,
    approved_by TEXT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE INDEX runs_pull ON runs (forge, repo, pr_number, head_sha);

-- "/fluxplan approve": valid for one head commit only.
CREATE TABLE approvals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    head_sha TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved_at BIGINT NOT NULL
);
CREATE INDEX approvals_pull ON approvals (forge, repo, pr_number, head_sha);
