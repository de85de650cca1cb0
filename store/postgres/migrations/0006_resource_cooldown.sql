-- Resource cooldowns (store.Kind.ResourceCooldown): after a job of such a kind ends on a
-- resource, the resource is cooling down for every kind until cooldown_until (NULL: not cooling
-- down); cooldown_job is the job whose end started it.
ALTER TABLE job_kinds ADD COLUMN resource_cooldown_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE resources ADD COLUMN cooldown_until timestamptz, ADD COLUMN cooldown_job bigint NOT NULL DEFAULT 0;
