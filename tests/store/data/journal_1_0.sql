-- A journal as hostapp wrote it at schema 1.0 (user_version 65536), for the upgrade test.
PRAGMA user_version = 65536;
BEGIN TRANSACTION;
CREATE TABLE "events" (
   "seq" INTEGER PRIMARY KEY,
   "op_id" TEXT NOT NULL,
   "at" REAL NOT NULL,
   "kind" TEXT NOT NULL,
   "data" TEXT
);
INSERT INTO "events" VALUES(1,'op-1',1760000001.0,'status','{"to":"pending"}');
INSERT INTO "events" VALUES(2,'op-2',1760000002.0,'status','{"to":"pending"}');
INSERT INTO "events" VALUES(3,'op-2',1.79543509912631726269e+09,'status','{"from":"pending","to":"running","message":"step 3/10"}');
INSERT INTO "events" VALUES(4,'op-3',1760000003.0,'status','{"to":"pending"}');
INSERT INTO "events" VALUES(5,'op-3',1.79543509913972401618e+09,'status','{"from":"pending","to":"input_required"}');
INSERT INTO "events" VALUES(6,'op-4',1760000004.0,'status','{"to":"pending"}');
INSERT INTO "events" VALUES(7,'op-4',1.79543509915082716938e+09,'status','{"from":"pending","to":"running"}');
INSERT INTO "events" VALUES(8,'op-4',1.79543509915920066833e+09,'status','{"from":"running","to":"completed"}');
INSERT INTO "events" VALUES(9,'op-5',1760000005.0,'status','{"to":"pending"}');
INSERT INTO "events" VALUES(10,'op-5',1.795435099171585083e+09,'status','{"from":"pending","to":"unknown","message":"the server restarted"}');
INSERT INTO "events" VALUES(11,'op-2',1.7954350991727979183e+09,'progress','{"progress":3}');
CREATE TABLE "operations" (
   "id" TEXT PRIMARY KEY,
   "server" TEXT NOT NULL,
   "method" TEXT NOT NULL,
   "params" TEXT NOT NULL,
   "tool" TEXT,
   "jsonrpc_id" TEXT,
   "mechanism" TEXT,
   "status" TEXT NOT NULL,
   "progress" REAL,
   "total" REAL,
   "message" TEXT,
   "created_at" REAL NOT NULL,
   "updated_at" REAL NOT NULL,
   "deadline" REAL,
   "result" TEXT,
   "error" TEXT,
   "handle_ref" TEXT,
   "handle" TEXT,
   "pending_input" TEXT,
   "resumable" INTEGER,
   "delivered" INTEGER,
   "finished_at" REAL,
   "in_flight" INTEGER NOT NULL
);
INSERT INTO "operations" VALUES('op-1','lab','tools/call','{"name":"long_task","arguments":{"seconds":30}}','long_task','1',NULL,'pending',NULL,NULL,NULL,1760000001.0,1760000001.0,NULL,NULL,NULL,NULL,'{}',NULL,1,0,NULL,1);
INSERT INTO "operations" VALUES('op-2','lab','tools/call','{"name":"long_task","arguments":{"seconds":30}}','long_task','2','tasks_2025','running',3.0,10.0,'step 3/10',1760000002.0,1.79543509912631726269e+09,NULL,NULL,NULL,'task_id:abababababababababababababababab','{"poll_ms":500}',NULL,1,0,NULL,1);
INSERT INTO "operations" VALUES('op-3','lab','tools/call','{"name":"long_task","arguments":{"seconds":30}}','long_task','3','mrtr','input_required',NULL,NULL,NULL,1760000003.0,1.79543509913972401618e+09,NULL,NULL,NULL,NULL,'{}','{"message":"Continue?"}',1,0,NULL,1);
INSERT INTO "operations" VALUES('op-4','lab','tools/call','{"name":"long_task","arguments":{"seconds":30}}','long_task','4',NULL,'completed',NULL,NULL,NULL,1760000004.0,1.79543509916419816011e+09,NULL,'{"content":[{"type":"text","text":"done"}]}',NULL,NULL,'{}',NULL,1,1,1.79543509915920066833e+09,0);
INSERT INTO "operations" VALUES('op-5','lab','tools/call','{"name":"long_task","arguments":{"seconds":30}}','long_task','5',NULL,'unknown',NULL,NULL,NULL,1760000005.0,1.795435099171585083e+09,NULL,NULL,'{"message":"the server restarted"}',NULL,'{}',NULL,0,0,1.795435099171585083e+09,0);
CREATE TABLE "servers" (
   "name" TEXT PRIMARY KEY,
   "transport" TEXT NOT NULL,
   "url" TEXT,
   "headers" TEXT,
   "secret_headers" TEXT,
   "command" TEXT,
   "args" TEXT,
   "env" TEXT,
   "secret_env" TEXT,
   "enabled" INTEGER NOT NULL,
   "protocol_version" TEXT,
   "session_ref" TEXT,
   "last_seen" REAL
);
INSERT INTO "servers" VALUES('lab','http','http://127.0.0.1:8765/mcp','{}','{}',NULL,'[]','{}','{}',1,'2025-11-25',NULL,NULL);
CREATE INDEX "operations_by_list_order"
    ON "operations" ("in_flight", "created_at", "id");
CREATE INDEX "operations_by_status"
    ON "operations" ("status", "created_at", "id");
CREATE INDEX "operations_by_server"
    ON "operations" ("server", "created_at");
CREATE INDEX "events_by_operation"
    ON "events" ("op_id", "seq");
CREATE TRIGGER events_append_only BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the event timeline is append-only'); END;
COMMIT;
