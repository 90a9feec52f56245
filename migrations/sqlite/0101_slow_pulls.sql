-- Pull requests whose plans keep hitting the time limit: `strikes` counts their plans in a row
-- that ran out of time (the row goes once a plan finishes in time). Their jobs are claimed
-- behind everyone else's, and a replica runs them on all but one of its workers.
CREATE TABLE slow_pulls (
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    strikes BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (forge, repo, pr_number)
);
