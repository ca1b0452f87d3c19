-- Single sign-on (issue 16, SPEC K16): a console user is local (a password
-- of the console's) or comes from the OpenID provider, created and updated
-- at each sign-in. An oidc user is found by the provider's subject, never
-- by username, so that no one takes over a local account by choosing a
-- username at the provider; its password_hash holds "!", which no
-- password verifies.
ALTER TABLE unstuck_console_user ADD COLUMN source TEXT NOT NULL DEFAULT 'local' CHECK (source IN ('local', 'oidc'));
ALTER TABLE unstuck_console_user ADD COLUMN subject TEXT;
ALTER TABLE unstuck_console_user ADD COLUMN email TEXT NOT NULL DEFAULT '';
ALTER TABLE unstuck_console_user ADD COLUMN display_name TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX unstuck_console_user_subject_key ON unstuck_console_user (source, subject)
    WHERE subject IS NOT NULL;
