-- Locking: none. Isolation: none (no row is read).
-- The start's first round trip (OPS-24 step 8): the server's version, checked against the
-- oldest one QueueBox runs on (config.md CFG-38).
SHOW server_version_num
