-- Locking: releases the named session lock queuebox_migrate. Isolation: none.
SELECT RELEASE_LOCK('queuebox_migrate')
