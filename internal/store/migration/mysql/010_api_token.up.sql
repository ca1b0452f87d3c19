-- API tokens of the operator API (SPEC K25) on MySQL 8 or MariaDB 10.6+;
-- see the PostgreSQL line's 010_api_token. Safe to run again. Times are
-- Unix microseconds.
CREATE TABLE IF NOT EXISTS unstuck_console_api_token (
    id           BIGINT        NOT NULL AUTO_INCREMENT,
    name         VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    owner        VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NULL,
    role         VARCHAR(255)  NOT NULL DEFAULT '',
    secret_hash  VARBINARY(32) NOT NULL,
    created_by   VARCHAR(255)  NOT NULL,
    created_at   BIGINT        NOT NULL,
    expires_at   BIGINT        NULL,
    revoked_at   BIGINT        NULL,
    last_used_at BIGINT        NULL,
    PRIMARY KEY (id),
    UNIQUE KEY unstuck_console_api_token_name_key (name),
    UNIQUE KEY unstuck_console_api_token_hash_key (secret_hash),
    CONSTRAINT unstuck_console_api_token_name_check CHECK (name REGEXP '^[a-z0-9._-]{1,64}$'),
    CONSTRAINT unstuck_console_api_token_role_check CHECK ((owner IS NULL) <> (role = ''))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
