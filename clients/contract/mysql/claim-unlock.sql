-- Claim step 7 of 7 (pull.md §5.3). Locking: releases the named lock of step 1; always runs once step 1 succeeded. After a failure between lock and unlock the client closes the connection instead of returning it to a pool, which releases the lock (PULL-20).
SELECT RELEASE_LOCK(CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('{inbox}', ':', :source), 256), 40)))
