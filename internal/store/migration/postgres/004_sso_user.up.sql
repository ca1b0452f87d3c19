-- Single sign-on (issue 16, SPEC K16): a console user is local (a password
-- of the console's) or comes from the OpenID provider, created and updated
-- at each sign-in. An oidc user is found by the provider's subject, never
-- by username, so that no one takes over a local account by choosing a
-- username at the provider; its password_hash holds "!", which no
-- password verifies.
ALTER TABLE unstuck_console_user
    ADD COLUMN source text NOT NULL DEFAULT 'local'
        CONSTRAINT unstuck_console_user_source_check CHECK (source IN ('local', 'oidc')),
    ADD COLUMN subject text,
    ADD COLUMN email text NOT NULL DEFAULT '',
    ADD COLUMN display_name text NOT NULL DEFAULT '';

CREATE UNIQUE INDEX unstuck_console_user_subject_key ON unstuck_console_user (source, subject)
    WHERE subject IS NOT NULL;
