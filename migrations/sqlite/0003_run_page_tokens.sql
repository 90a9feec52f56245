-- Run pages open only with their run's unguessable token (carried by the links in comments).
ALTER TABLE runs ADD COLUMN page_token TEXT;
