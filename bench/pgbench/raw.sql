INSERT INTO baton_pgbench.raw_locks (key, holder, expires_at) VALUES ('k' || :client_id, 'bench', now() + interval '15 seconds') ON CONFLICT DO NOTHING;
DELETE FROM baton_pgbench.raw_locks WHERE key = 'k' || :client_id AND holder = 'bench';
