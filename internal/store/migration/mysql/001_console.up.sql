-- The operations console's own tables on MySQL 8 or MariaDB 10.6+
-- (InnoDB): the PostgreSQL and SQLite lines' migrations 001 to 005 in one,
-- as a MySQL database starts with all of them. Every statement is safe to
-- run again (internal/migrate.MySQL: MySQL commits each DDL statement on
-- its own). Timestamps are BIGINT Unix microseconds, UTC, as on SQLite.
-- Text is utf8mb4 with a binary collation (compared byte for byte) or
-- VARBINARY.

-- Console users (SPEC CON-K5), local or from the OpenID provider (SPEC
-- K16). An oidc user is found by (source, subject); MySQL's UNIQUE allows
-- any number of NULL subjects, as PostgreSQL's partial index does.
CREATE TABLE IF NOT EXISTS unstuck_console_user (
    id            BIGINT         NOT NULL AUTO_INCREMENT,
    username      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    role          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    password_hash VARBINARY(1024) NOT NULL,
    disabled      TINYINT        NOT NULL DEFAULT 0,
    created_at    BIGINT         NOT NULL,
    updated_at    BIGINT         NOT NULL,
    source        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'local',
    subject       VARBINARY(1024) NULL,
    email         VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    display_name  VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY unstuck_console_user_username_key (username),
    UNIQUE KEY unstuck_console_user_subject_key (source, subject),
    CONSTRAINT unstuck_console_user_username_check CHECK (username REGEXP '^[a-z0-9._-]{1,64}$'),
    CONSTRAINT unstuck_console_user_role_check CHECK (role <> ''),
    CONSTRAINT unstuck_console_user_hash_check CHECK (password_hash <> ''),
    CONSTRAINT unstuck_console_user_disabled_check CHECK (disabled IN (0, 1)),
    CONSTRAINT unstuck_console_user_source_check CHECK (source IN ('local', 'oidc'))
) ENGINE = InnoDB;

-- The console's sessions (scs tokens, case-sensitive), with the signed-in
-- user's id beside the session so that both are read in one statement.
-- expiry is Unix microseconds, UTC.
CREATE TABLE IF NOT EXISTS sessions (
    token   VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    data    MEDIUMBLOB NOT NULL,
    expiry  BIGINT     NOT NULL,
    user_id BIGINT     NULL,
    PRIMARY KEY (token),
    KEY sessions_expiry_idx (expiry),
    KEY sessions_user_idx (user_id)
) ENGINE = InnoDB;

-- Bulk decisions and four-eyes approvals (issue 14, SPEC K12, K13); see
-- the PostgreSQL line's 005_bulk.
CREATE TABLE IF NOT EXISTS unstuck_console_bulk (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    kind            VARCHAR(32)  NOT NULL,
    action          VARCHAR(32)  NOT NULL,
    single          TINYINT      NOT NULL DEFAULT 0,
    filter          TEXT         NOT NULL,
    params          TEXT         NOT NULL,
    reason          TEXT         NOT NULL,
    requested_by    VARCHAR(255) NOT NULL,
    requested_role  VARCHAR(255) NOT NULL,
    status          VARCHAR(32)  NOT NULL,
    total           BIGINT       NOT NULL,
    not_legal       BIGINT       NOT NULL DEFAULT 0,
    decided_by      TEXT         NOT NULL DEFAULT (''),
    decision_reason TEXT         NOT NULL DEFAULT (''),
    cancelled_by    VARCHAR(255) NOT NULL DEFAULT '',
    created_at      BIGINT       NOT NULL,
    updated_at      BIGINT       NOT NULL,
    expires_at      BIGINT       NULL,
    finished_at     BIGINT       NULL,
    PRIMARY KEY (id),
    KEY unstuck_console_bulk_status (status, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS unstuck_console_bulk_item (
    bulk_id    BIGINT        NOT NULL,
    seq        INT           NOT NULL,
    target_id  VARCHAR(255)  NOT NULL,
    version    BIGINT        NOT NULL,
    step       VARCHAR(255)  NOT NULL DEFAULT '',
    outcome    VARCHAR(16)   NOT NULL DEFAULT 'pending',
    detail     VARCHAR(1000) NOT NULL DEFAULT '',
    decided_at BIGINT        NULL,
    PRIMARY KEY (bulk_id, seq),
    KEY unstuck_console_bulk_item_outcome (bulk_id, outcome, seq),
    CONSTRAINT unstuck_console_bulk_item_bulk_fk FOREIGN KEY (bulk_id) REFERENCES unstuck_console_bulk (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
