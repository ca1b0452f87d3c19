-- One person behind several console accounts (SPEC K13: the requester can
-- never approve their own request, whichever of their accounts they use).
-- Two accounts are one person when an admin linked them, or when both
-- carry the same verified email (compared without case); the relation is
-- transitive (internal/store/person.go reads it).
--
-- email_verified: whether the account's email is vouched for. For an oidc
-- user it is the provider's email_verified claim at its last sign-in
-- (users created before this migration count as unverified until they
-- sign in again); a local account's stays false, as nothing sets a local
-- account's email.
--
-- person_id: the link an admin made. NULL for an account linked with no
-- other; otherwise the smallest id among the accounts of its link group,
-- so every group has at least two accounts and is named by one of them.
-- Linking or unlinking rewrites the group in one transaction; it never
-- moves updated_at (which clears a local account's sign-in throttle).
ALTER TABLE unstuck_console_user
    ADD COLUMN email_verified boolean NOT NULL DEFAULT false,
    ADD COLUMN person_id bigint;
