-- Resource cooldowns (store.Kind.ResourceCooldown): after a job of such a kind ends on a
-- resource, the resource is cooling down for every kind until cooldown_until (Unix ns; 0: not
-- cooling down); cooldown_job is the job whose end started it.
ALTER TABLE job_kinds ADD COLUMN resource_cooldown_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN cooldown_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN cooldown_job INTEGER NOT NULL DEFAULT 0;
