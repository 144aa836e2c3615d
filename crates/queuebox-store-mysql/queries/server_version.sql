-- Locking: none. Isolation: none (no row is read).
-- The start's first round trip (OPS-24 step 8): the server's version, checked against the
-- oldest ones QueueBox runs on (config.md CFG-38: MySQL 8.0.13, MariaDB 10.6).
SELECT VERSION()
