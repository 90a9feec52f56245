-- The last write the newest job of a pull request (or merge group) made on each of its channels
-- (its commit status, its sticky comment), numbered in the order they were recorded. A write is
-- recorded before it is posted, and only while its job is still the newest; a writer that sees
-- a later number after posting repeats the latest write, so the forge ends showing it
-- (`jobs::fence`).
CREATE TABLE forge_writes (
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    channel TEXT NOT NULL,
    seq BIGINT NOT NULL,
    job_id BIGINT NOT NULL,
    body TEXT NOT NULL,
    written_at BIGINT NOT NULL,
    PRIMARY KEY (forge, repo, channel)
);
