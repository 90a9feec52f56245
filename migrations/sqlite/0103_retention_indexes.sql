-- Retention prunes by age: these keep its deletes from scanning whole tables.
CREATE INDEX runs_created_at ON runs (created_at);
CREATE INDEX events_received_at ON events (received_at);
CREATE INDEX jobs_updated_at ON jobs (updated_at);
CREATE INDEX replies_replied_at ON replies (replied_at);
