-- PostgreSQL identities for orloj's distributed topology (run once as a superuser,
-- e.g. psql -v ON_ERROR_STOP=1 -f roles.sql). See deploy/README.md, "Database identities".
--
-- One login role per orloj role that uses the store, named like the CN of its
-- client certificate (deploy/tls/generate.sh), so `hostssl ... cert` in pg_hba.conf
-- logs each process in as itself. The runners get no role: they never touch the
-- database, and a runner certificate is refused here.
--
-- The roles act as the owner role `orloj` (SET ROLE by default): every role
-- migrates the schema at start, so all must own what they create. The identities
-- still tell the processes apart in pg_stat_activity and the server log
-- (session_user), and each one can be revoked on its own.
CREATE ROLE orloj NOLOGIN;
CREATE DATABASE orloj OWNER orloj;

CREATE ROLE "orloj-api" LOGIN IN ROLE orloj;
CREATE ROLE "orloj-scheduler" LOGIN IN ROLE orloj;
CREATE ROLE "orloj-log-ingest" LOGIN IN ROLE orloj;
CREATE ROLE "orloj-notifier" LOGIN IN ROLE orloj;

ALTER ROLE "orloj-api" SET role = 'orloj';
ALTER ROLE "orloj-scheduler" SET role = 'orloj';
ALTER ROLE "orloj-log-ingest" SET role = 'orloj';
ALTER ROLE "orloj-notifier" SET role = 'orloj';
