SELECT GET_LOCK(CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('inbox', ':', :source), 256), 40)), 10)
