-- API tokens of the operator API under /api/v1 (SPEC K25). A user token
-- (owner set) acts as its user, with the user's role and identity; a
-- service token (owner NULL) acts as "token:<name>" with its own role.
-- Only the SHA-256 of the secret is kept, never the secret; a token is
-- found by that hash. A revoked token keeps its row: the audit trail names
-- it. Times: revoked_at, expires_at and last_used_at are NULL until set.
CREATE TABLE unstuck_console_api_token (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL
        CONSTRAINT unstuck_console_api_token_name_check CHECK (name ~ '^[a-z0-9._-]{1,64}$'),
    owner        text,
    role         text        NOT NULL DEFAULT '',
    secret_hash  bytea       NOT NULL
        CONSTRAINT unstuck_console_api_token_hash_check CHECK (length(secret_hash) = 32),
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    revoked_at   timestamptz,
    last_used_at timestamptz,
    CONSTRAINT unstuck_console_api_token_name_key UNIQUE (name),
    CONSTRAINT unstuck_console_api_token_hash_key UNIQUE (secret_hash),
    CONSTRAINT unstuck_console_api_token_role_check CHECK ((owner IS NULL) <> (role = ''))
);
