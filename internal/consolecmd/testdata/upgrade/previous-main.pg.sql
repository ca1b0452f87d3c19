--
-- PostgreSQL database dump
--

\restrict 33wtPAJh1S4L7UvT8h5wOFtRmyhKfzJm9d5wlhfI8PuTWQeM4uHuksDPyZ5QYSj

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: river_job_state; Type: TYPE; Schema: public; Owner: -
--

CREATE TYPE public.river_job_state AS ENUM (
    'available',
    'cancelled',
    'completed',
    'discarded',
    'pending',
    'retryable',
    'running',
    'scheduled'
);


--
-- Name: river_job_state_in_bitmask(bit, public.river_job_state); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.river_job_state_in_bitmask(bitmask bit, state public.river_job_state) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE state
        WHEN 'available' THEN get_bit(bitmask, 7)
        WHEN 'cancelled' THEN get_bit(bitmask, 6)
        WHEN 'completed' THEN get_bit(bitmask, 5)
        WHEN 'discarded' THEN get_bit(bitmask, 4)
        WHEN 'pending'   THEN get_bit(bitmask, 3)
        WHEN 'retryable' THEN get_bit(bitmask, 2)
        WHEN 'running'   THEN get_bit(bitmask, 1)
        WHEN 'scheduled' THEN get_bit(bitmask, 0)
        ELSE 0
    END = 1;
$$;


--
-- Name: unstuck_audit_entry_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.unstuck_audit_entry_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'unstuck_audit_entry is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit entries are never changed or removed; see package audit';
END
$$;


--
-- Name: unstuck_audit_entry_keyed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.unstuck_audit_entry_keyed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NEW.key_id = '' THEN
        RAISE EXCEPTION 'unstuck_audit_entry: an entry needs the key ID of its MAC'
            USING ERRCODE = 'check_violation',
                  HINT = 'entries are appended by the console, which holds the audit key';
    END IF;
    RETURN NEW;
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: demo_account; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.demo_account (
    id text NOT NULL,
    key text NOT NULL,
    operation_id text NOT NULL,
    email text NOT NULL,
    status text NOT NULL,
    created_at text NOT NULL,
    closed_at text DEFAULT ''::text NOT NULL,
    CONSTRAINT demo_account_status_check CHECK ((status = ANY (ARRAY['active'::text, 'closed'::text])))
);


--
-- Name: demo_workspace; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.demo_workspace (
    key text NOT NULL,
    seq integer NOT NULL,
    state text NOT NULL
);


--
-- Name: river_job; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.river_job (
    id bigint NOT NULL,
    state public.river_job_state DEFAULT 'available'::public.river_job_state NOT NULL,
    attempt smallint DEFAULT 0 NOT NULL,
    max_attempts smallint DEFAULT 25 NOT NULL,
    attempted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finalized_at timestamp with time zone,
    scheduled_at timestamp with time zone DEFAULT now() NOT NULL,
    priority smallint DEFAULT 1 NOT NULL,
    args jsonb NOT NULL,
    attempted_by text[],
    errors jsonb[],
    kind text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    tags character varying(255)[] DEFAULT '{}'::character varying[] NOT NULL,
    unique_key bytea,
    unique_states bit(8),
    CONSTRAINT finalized_or_finalized_at_null CHECK ((((finalized_at IS NULL) AND (state <> ALL (ARRAY['cancelled'::public.river_job_state, 'completed'::public.river_job_state, 'discarded'::public.river_job_state]))) OR ((finalized_at IS NOT NULL) AND (state = ANY (ARRAY['cancelled'::public.river_job_state, 'completed'::public.river_job_state, 'discarded'::public.river_job_state]))))),
    CONSTRAINT kind_length CHECK (((char_length(kind) > 0) AND (char_length(kind) < 128))),
    CONSTRAINT max_attempts_is_positive CHECK ((max_attempts > 0)),
    CONSTRAINT priority_in_range CHECK (((priority >= 1) AND (priority <= 4))),
    CONSTRAINT queue_length CHECK (((char_length(queue) > 0) AND (char_length(queue) < 128)))
);


--
-- Name: river_job_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.river_job_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: river_job_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.river_job_id_seq OWNED BY public.river_job.id;


--
-- Name: river_leader; Type: TABLE; Schema: public; Owner: -
--

CREATE UNLOGGED TABLE public.river_leader (
    elected_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    leader_id text NOT NULL,
    name text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT leader_id_length CHECK (((char_length(leader_id) > 0) AND (char_length(leader_id) < 128))),
    CONSTRAINT name_length CHECK ((name = 'default'::text))
);


--
-- Name: river_migration; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.river_migration (
    line text NOT NULL,
    version bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT line_length CHECK (((char_length(line) > 0) AND (char_length(line) < 128))),
    CONSTRAINT version_gte_1 CHECK ((version >= 1))
);


--
-- Name: river_notification; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.river_notification (
    id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    payload text NOT NULL,
    topic text NOT NULL,
    CONSTRAINT topic_length CHECK (((length(topic) > 0) AND (length(topic) < 128)))
);


--
-- Name: river_notification_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.river_notification_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: river_notification_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.river_notification_id_seq OWNED BY public.river_notification.id;


--
-- Name: river_queue; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.river_queue (
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    paused_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL
);


--
-- Name: sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sessions (
    token text NOT NULL,
    data bytea NOT NULL,
    expiry timestamp with time zone NOT NULL,
    user_id bigint
);


--
-- Name: unstuck_audit_checkpoint; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_audit_checkpoint (
    id bigint NOT NULL,
    seq bigint NOT NULL,
    hash bytea NOT NULL,
    at timestamp with time zone NOT NULL,
    key_id text NOT NULL,
    mac bytea NOT NULL,
    CONSTRAINT unstuck_audit_checkpoint_hash_check CHECK ((octet_length(hash) = 32)),
    CONSTRAINT unstuck_audit_checkpoint_mac_check CHECK ((octet_length(mac) = 32)),
    CONSTRAINT unstuck_audit_checkpoint_seq_check CHECK ((seq > 0))
);


--
-- Name: unstuck_audit_checkpoint_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.unstuck_audit_checkpoint ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.unstuck_audit_checkpoint_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: unstuck_audit_entry; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_audit_entry (
    seq bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    actor text NOT NULL,
    role text NOT NULL,
    action text NOT NULL,
    target_kind text NOT NULL,
    target_id text NOT NULL,
    reason text NOT NULL,
    before_state text,
    after_state text,
    outcome text NOT NULL,
    request_id text NOT NULL,
    client_addr text NOT NULL,
    user_agent text NOT NULL,
    prev_hash bytea NOT NULL,
    hash bytea NOT NULL,
    key_id text DEFAULT ''::text NOT NULL,
    CONSTRAINT unstuck_audit_entry_action_check CHECK ((action <> ''::text)),
    CONSTRAINT unstuck_audit_entry_actor_check CHECK ((actor <> ''::text)),
    CONSTRAINT unstuck_audit_entry_hash_check CHECK ((octet_length(hash) = 32)),
    CONSTRAINT unstuck_audit_entry_key_id_check CHECK ((key_id ~ '^([0-9a-f]{16})?$'::text)),
    CONSTRAINT unstuck_audit_entry_outcome_check CHECK ((outcome <> ''::text)),
    CONSTRAINT unstuck_audit_entry_prev_hash_check CHECK ((octet_length(prev_hash) = 32)),
    CONSTRAINT unstuck_audit_entry_seq_check CHECK ((seq > 0)),
    CONSTRAINT unstuck_audit_entry_target_kind_check CHECK ((target_kind <> ''::text))
);


--
-- Name: unstuck_console_user; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_console_user (
    id bigint NOT NULL,
    username text NOT NULL,
    role text NOT NULL,
    password_hash text NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT unstuck_console_user_password_hash_check CHECK ((password_hash <> ''::text)),
    CONSTRAINT unstuck_console_user_role_check CHECK ((role <> ''::text)),
    CONSTRAINT unstuck_console_user_username_check CHECK ((username ~ '^[a-z0-9._-]{1,64}$'::text))
);


--
-- Name: unstuck_console_user_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.unstuck_console_user ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.unstuck_console_user_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: unstuck_demo; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_demo (
    created_at text NOT NULL
);


--
-- Name: unstuck_idem_fence_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.unstuck_idem_fence_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: unstuck_idem_record; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_idem_record (
    id bigint NOT NULL,
    scope text NOT NULL,
    operation text NOT NULL,
    key_digest text NOT NULL,
    fingerprint text DEFAULT ''::text NOT NULL,
    status text NOT NULL,
    result bytea,
    response_code integer DEFAULT 0 NOT NULL,
    correlation_id text DEFAULT ''::text NOT NULL,
    external_ref text DEFAULT ''::text NOT NULL,
    resource_ids text[] DEFAULT '{}'::text[] NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    owner_token text DEFAULT ''::text NOT NULL,
    fence bigint NOT NULL,
    lease_expires_at timestamp with time zone,
    attempts integer DEFAULT 1 NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT unstuck_idem_record_key_digest_check CHECK ((length(key_digest) = 64)),
    CONSTRAINT unstuck_idem_record_lease_check CHECK (((status <> 'processing'::text) OR (lease_expires_at IS NOT NULL))),
    CONSTRAINT unstuck_idem_record_operation_check CHECK ((operation <> ''::text)),
    CONSTRAINT unstuck_idem_record_scope_check CHECK (((scope <> ''::text) AND (octet_length(scope) <= 255))),
    CONSTRAINT unstuck_idem_record_status_check CHECK ((status = ANY (ARRAY['processing'::text, 'completed'::text, 'failed'::text, 'pending'::text, 'unavailable'::text])))
);


--
-- Name: unstuck_idem_record_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.unstuck_idem_record ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.unstuck_idem_record_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: unstuck_migration; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_migration (
    line text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: unstuck_saga_event; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_saga_event (
    id bigint NOT NULL,
    operation_id text NOT NULL,
    step text DEFAULT ''::text NOT NULL,
    action text NOT NULL,
    from_status text DEFAULT ''::text NOT NULL,
    to_status text DEFAULT ''::text NOT NULL,
    actor text NOT NULL,
    message text DEFAULT ''::text NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    at timestamp with time zone NOT NULL
);


--
-- Name: unstuck_saga_event_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.unstuck_saga_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: unstuck_saga_event_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.unstuck_saga_event_id_seq OWNED BY public.unstuck_saga_event.id;


--
-- Name: unstuck_saga_finding; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_saga_finding (
    id bigint NOT NULL,
    operation_id text NOT NULL,
    step text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    external_id text DEFAULT ''::text NOT NULL,
    detail text NOT NULL,
    detected_at timestamp with time zone NOT NULL,
    resolved_at timestamp with time zone,
    fingerprint text DEFAULT ''::text NOT NULL,
    resolved_by text DEFAULT ''::text NOT NULL,
    supersedes bigint,
    CONSTRAINT unstuck_saga_finding_kind_check CHECK ((kind = ANY (ARRAY['orphan_external'::text, 'missing_external'::text, 'unresolved'::text])))
);


--
-- Name: unstuck_saga_finding_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.unstuck_saga_finding_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: unstuck_saga_finding_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.unstuck_saga_finding_id_seq OWNED BY public.unstuck_saga_finding.id;


--
-- Name: unstuck_saga_operation; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_saga_operation (
    id text NOT NULL,
    type text NOT NULL,
    status text NOT NULL,
    correlation_id text DEFAULT ''::text NOT NULL,
    input jsonb NOT NULL,
    current_step text DEFAULT ''::text NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    review_reason text DEFAULT ''::text NOT NULL,
    resolution text DEFAULT ''::text NOT NULL,
    version bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT unstuck_saga_operation_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'completed'::text, 'failed'::text, 'compensating'::text, 'compensated'::text, 'review_required'::text])))
);


--
-- Name: unstuck_saga_step; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.unstuck_saga_step (
    operation_id text NOT NULL,
    name text NOT NULL,
    seq integer NOT NULL,
    kind text NOT NULL,
    system text DEFAULT ''::text NOT NULL,
    status text NOT NULL,
    idempotency_key text NOT NULL,
    external_id text DEFAULT ''::text NOT NULL,
    result jsonb,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    verifications integer DEFAULT 0 NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    last_error_class text DEFAULT ''::text NOT NULL,
    compensable boolean NOT NULL,
    comp_seq integer NOT NULL,
    comp_key text NOT NULL,
    comp_status text DEFAULT ''::text NOT NULL,
    comp_attempts integer DEFAULT 0 NOT NULL,
    comp_max_attempts integer NOT NULL,
    comp_error text DEFAULT ''::text NOT NULL,
    generation integer DEFAULT 0 NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT unstuck_saga_step_comp_status_check CHECK ((comp_status = ANY (ARRAY[''::text, 'pending'::text, 'running'::text, 'retrying'::text, 'completed'::text, 'failed'::text]))),
    CONSTRAINT unstuck_saga_step_kind_check CHECK ((kind = ANY (ARRAY['compensatable'::text, 'pivot'::text, 'retriable'::text]))),
    CONSTRAINT unstuck_saga_step_last_error_class_check CHECK ((last_error_class = ANY (ARRAY[''::text, 'transient'::text, 'permanent'::text, 'uncertain'::text]))),
    CONSTRAINT unstuck_saga_step_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'retrying'::text, 'uncertain'::text, 'completed'::text, 'failed'::text, 'skipped'::text, 'compensating'::text, 'compensated'::text, 'compensation_failed'::text])))
);


--
-- Name: river_job id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_job ALTER COLUMN id SET DEFAULT nextval('public.river_job_id_seq'::regclass);


--
-- Name: river_notification id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_notification ALTER COLUMN id SET DEFAULT nextval('public.river_notification_id_seq'::regclass);


--
-- Name: unstuck_saga_event id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_event ALTER COLUMN id SET DEFAULT nextval('public.unstuck_saga_event_id_seq'::regclass);


--
-- Name: unstuck_saga_finding id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_finding ALTER COLUMN id SET DEFAULT nextval('public.unstuck_saga_finding_id_seq'::regclass);


--
-- Data for Name: demo_account; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.demo_account VALUES ('acct_8a6a7648a2ea8c40', 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/account', 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'ann@example.com', 'active', '2026-12-01T03:21:11.842410422Z', '');
INSERT INTO public.demo_account VALUES ('acct_86fe2858afd86937', 'signup_2b670bbebda495f4e0bb8e33606df0b1/account', 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'drift@example.com', 'active', '2026-12-01T03:21:12.13621304Z', '');
INSERT INTO public.demo_account VALUES ('acct_ccd4e38a65b41c07', 'signup_3a4d0b314a0759f73052328690139f56/account', 'signup_3a4d0b314a0759f73052328690139f56', 'slow@example.com', 'active', '2026-12-01T03:21:12.542527367Z', '');
INSERT INTO public.demo_account VALUES ('acct_7710a52af57a9cee', 'signup_8b8fd94b395cef8c77259c02189ceefc/account', 'signup_8b8fd94b395cef8c77259c02189ceefc', 'perm@example.com', 'closed', '2026-12-01T03:21:13.915270685Z', '2026-12-01T03:21:14.22760647Z');
INSERT INTO public.demo_account VALUES ('acct_36451ce265995467', 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/account', 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'stuck@example.com', 'active', '2026-12-01T03:21:14.32844764Z', '');
INSERT INTO public.demo_account VALUES ('acct_46bc3ae0975e4cce', 'signup_fdfa4950b69c26fc6ce14923f73bc420/account', 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'nobody@example.com', 'active', '2026-12-01T03:21:15.65058613Z', '');


--
-- Data for Name: demo_workspace; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.demo_workspace VALUES ('signup_1dc3844d7ac0a6163ecbd3f9eb760191/workspace', 1, '{"key":"signup_1dc3844d7ac0a6163ecbd3f9eb760191/workspace","workspace":{"id":"ws_000001","idempotency_key":"signup_1dc3844d7ac0a6163ecbd3f9eb760191/workspace","owner":"ann@example.com","active":true,"created_at":"2026-12-01T03:21:11.939432755Z"},"live":true,"creates":1,"effects":1,"deletes":0}');
INSERT INTO public.demo_workspace VALUES ('signup_3a4d0b314a0759f73052328690139f56/workspace', 3, '{"key":"signup_3a4d0b314a0759f73052328690139f56/workspace","workspace":{"id":"ws_000003","idempotency_key":"signup_3a4d0b314a0759f73052328690139f56/workspace","owner":"slow@example.com","active":true,"created_at":"2026-12-01T03:21:12.675809022Z"},"live":true,"creates":1,"effects":1,"deletes":0}');
INSERT INTO public.demo_workspace VALUES ('signup_8b8fd94b395cef8c77259c02189ceefc/workspace', 4, '{"key":"signup_8b8fd94b395cef8c77259c02189ceefc/workspace","workspace":{"id":"ws_000004","idempotency_key":"signup_8b8fd94b395cef8c77259c02189ceefc/workspace","owner":"perm@example.com","active":false,"created_at":"2026-12-01T03:21:14.022840931Z"},"live":false,"refused":"workspace ws_000004 created but activation refused","creates":1,"effects":1,"deletes":1}');
INSERT INTO public.demo_workspace VALUES ('signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace', 5, '{"key":"signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace","workspace":{"id":"ws_000005","idempotency_key":"signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace","owner":"stuck@example.com","active":false,"created_at":"2026-12-01T03:21:14.525284405Z"},"live":true,"refused":"workspace ws_000005 created but activation refused","creates":1,"effects":1,"deletes":0}');
INSERT INTO public.demo_workspace VALUES ('signup_fdfa4950b69c26fc6ce14923f73bc420/workspace', 6, '{"key":"signup_fdfa4950b69c26fc6ce14923f73bc420/workspace","workspace":{"id":"ws_000006","idempotency_key":"signup_fdfa4950b69c26fc6ce14923f73bc420/workspace","owner":"nobody@example.com","active":true,"created_at":"2026-12-01T03:21:15.809384974Z"},"live":true,"creates":1,"effects":1,"deletes":0}');
INSERT INTO public.demo_workspace VALUES ('signup_2b670bbebda495f4e0bb8e33606df0b1/workspace', 2, '{"key":"signup_2b670bbebda495f4e0bb8e33606df0b1/workspace","workspace":{"id":"ws_000002","idempotency_key":"signup_2b670bbebda495f4e0bb8e33606df0b1/workspace","owner":"drift@example.com","active":true,"created_at":"2026-12-01T03:21:12.241989674Z"},"live":false,"creates":1,"effects":1,"deletes":0}');


--
-- Data for Name: river_job; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.river_job VALUES (1, 'completed', 1, 5, '2026-12-01 03:21:11.831072+00', '2026-12-01 03:21:11.821355+00', '2026-12-01 03:21:11.85269+00', '2026-12-01 03:21:11.821355+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_1dc3844d7ac0a6163ecbd3f9eb760191"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xc5adfd5468e3ecf8bf800437ced3ce0a916734f904d9afe514dcd702e79fc305', B'11110101');
INSERT INTO public.river_job VALUES (2, 'completed', 1, 5, '2026-12-01 03:21:11.93152+00', '2026-12-01 03:21:11.850938+00', '2026-12-01 03:21:11.945463+00', '2026-12-01 03:21:11.850938+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_1dc3844d7ac0a6163ecbd3f9eb760191"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x6679d076351be274ae12e7874b87b8930c62d8a53321431ed9c9104a99c33f4e', B'11110101');
INSERT INTO public.river_job VALUES (3, 'completed', 1, 6, '2026-12-01 03:21:12.031934+00', '2026-12-01 03:21:11.944554+00', '2026-12-01 03:21:12.043318+00', '2026-12-01 03:21:11.944554+00', 1, '{"step": "welcome", "type": "demo_signup", "generation": 1, "operation_id": "signup_1dc3844d7ac0a6163ecbd3f9eb760191"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x2817e41bbb0668dfdbcbca2c92e346d841e280dc0dd1b3abddef656e7f3d8c66', B'11110101');
INSERT INTO public.river_job VALUES (4, 'completed', 1, 5, '2026-12-01 03:21:12.132675+00', '2026-12-01 03:21:12.052406+00', '2026-12-01 03:21:12.142353+00', '2026-12-01 03:21:12.052406+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_2b670bbebda495f4e0bb8e33606df0b1"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xd3769ed0531c1cfa8ebd0d93a895dddb49dd604d62226a68d490a7d67e15c35e', B'11110101');
INSERT INTO public.river_job VALUES (5, 'completed', 1, 5, '2026-12-01 03:21:12.233523+00', '2026-12-01 03:21:12.141742+00', '2026-12-01 03:21:12.248691+00', '2026-12-01 03:21:12.141742+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_2b670bbebda495f4e0bb8e33606df0b1"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xebc5a68248033021d83a6c61d0f280469a9cfbc6572b4cf5508a422bcfd9b395', B'11110101');
INSERT INTO public.river_job VALUES (6, 'completed', 1, 6, '2026-12-01 03:21:12.333508+00', '2026-12-01 03:21:12.247938+00', '2026-12-01 03:21:12.33955+00', '2026-12-01 03:21:12.247938+00', 1, '{"step": "welcome", "type": "demo_signup", "generation": 1, "operation_id": "signup_2b670bbebda495f4e0bb8e33606df0b1"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x9d79c26ec48a4ce53e6650350dcca062535ce24789414e729b1fa32e2065cea5', B'11110101');
INSERT INTO public.river_job VALUES (7, 'completed', 1, 5, '2026-12-01 03:21:12.434129+00', '2026-12-01 03:21:12.379222+00', '2026-12-01 03:21:12.4447+00', '2026-12-01 03:21:12.379222+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_1bd9535d1f41bd92c96600a6580eebb9"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x29e18ebc3aa6f1b78fde44f559161f1f70c8b461afe83ef11da59592f3f7dea0', B'11110101');
INSERT INTO public.river_job VALUES (8, 'completed', 1, 5, '2026-12-01 03:21:12.53531+00', '2026-12-01 03:21:12.495639+00', '2026-12-01 03:21:12.54859+00', '2026-12-01 03:21:12.495639+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_3a4d0b314a0759f73052328690139f56"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x6e6947242d8659de4bb576a6b2adb965ffbeab2115fd8ed0e0be626c516c6e37', B'11110101');
INSERT INTO public.river_job VALUES (9, 'completed', 1, 5, '2026-12-01 03:21:12.666682+00', '2026-12-01 03:21:12.548185+00', '2026-12-01 03:21:12.682473+00', '2026-12-01 03:21:12.548185+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_3a4d0b314a0759f73052328690139f56"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x52f90d8f8e4c6a207dfb9cfd95fa93b3579d105b6086af89834635369617b3f0', B'11110101');
INSERT INTO public.river_job VALUES (10, 'completed', 1, 5, '2026-12-01 03:21:13.709654+00', '2026-12-01 03:21:12.678139+00', '2026-12-01 03:21:13.714948+00', '2026-12-01 03:21:13.677221+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 2, "operation_id": "signup_3a4d0b314a0759f73052328690139f56"}', '{vm_2026_12_01T03_21_11_626509,vm_2026_12_01T03_21_11_626509}', NULL, 'saga.verify', '{"snoozes": 1}', 'saga', '{saga,demo_signup}', '\x55d9cdf654692b590d11ea70246d6711f920c34e04e5de39682c052b420c4cca', B'11110101');
INSERT INTO public.river_job VALUES (11, 'completed', 1, 6, '2026-12-01 03:21:13.810085+00', '2026-12-01 03:21:13.714513+00', '2026-12-01 03:21:13.815606+00', '2026-12-01 03:21:13.714513+00', 1, '{"step": "welcome", "type": "demo_signup", "generation": 1, "operation_id": "signup_3a4d0b314a0759f73052328690139f56"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xfb53477f310c41de10e0abb35a5374e7f4c718ca260728366662fd277463b490', B'11110101');
INSERT INTO public.river_job VALUES (12, 'completed', 1, 5, '2026-12-01 03:21:13.911204+00', '2026-12-01 03:21:13.880591+00', '2026-12-01 03:21:13.918135+00', '2026-12-01 03:21:13.880591+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_8b8fd94b395cef8c77259c02189ceefc"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xe7591ab007dd03c621288e926c073f53ebc1376401d46b3766a8e92e2a920423', B'11110101');
INSERT INTO public.river_job VALUES (13, 'completed', 1, 5, '2026-12-01 03:21:14.012081+00', '2026-12-01 03:21:13.917491+00', '2026-12-01 03:21:14.029434+00', '2026-12-01 03:21:13.917491+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_8b8fd94b395cef8c77259c02189ceefc"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x47756f1b1ba62d85d08433eb78e799573f3e4ea46401079955ad0abbc825d27d', B'11110101');
INSERT INTO public.river_job VALUES (14, 'completed', 1, 4, '2026-12-01 03:21:14.11265+00', '2026-12-01 03:21:14.028749+00', '2026-12-01 03:21:14.124268+00', '2026-12-01 03:21:14.028749+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 2, "operation_id": "signup_8b8fd94b395cef8c77259c02189ceefc"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.compensate', '{}', 'saga', '{saga,demo_signup}', '\xa9e5569eb38e60bcc7aa8ba2d3a64cb9a6694b904c5bf20a8f91212b3582952e', B'11110101');
INSERT INTO public.river_job VALUES (15, 'completed', 1, 5, '2026-12-01 03:21:14.225024+00', '2026-12-01 03:21:14.123885+00', '2026-12-01 03:21:14.229916+00', '2026-12-01 03:21:14.123885+00', 1, '{"step": "account", "type": "demo_signup", "generation": 2, "operation_id": "signup_8b8fd94b395cef8c77259c02189ceefc"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.compensate', '{}', 'saga', '{saga,demo_signup}', '\x9d3c4b698f8484aa89bc4c6f9d8d08b66ca2b2078eb98450dec6d69467932a80', B'11110101');
INSERT INTO public.river_job VALUES (16, 'completed', 1, 5, '2026-12-01 03:21:14.325102+00', '2026-12-01 03:21:14.266584+00', '2026-12-01 03:21:14.332319+00', '2026-12-01 03:21:14.266584+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_cdac44dc8d0053dccb0dfabb33d0c0ce"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x2a40e5974f4f422ddb28b14a220c1bbb6ac217a456ef4eaa6e3996d652f880f2', B'11110101');
INSERT INTO public.river_job VALUES (17, 'completed', 1, 5, '2026-12-01 03:21:14.484915+00', '2026-12-01 03:21:14.331971+00', '2026-12-01 03:21:14.536159+00', '2026-12-01 03:21:14.331971+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_cdac44dc8d0053dccb0dfabb33d0c0ce"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\xab8fe09008889c23bd53974006315f8552119262a6e03b9eaa19f6dea7f71d38', B'11110101');
INSERT INTO public.river_job VALUES (18, 'completed', 3, 4, '2026-12-01 03:21:15.540116+00', '2026-12-01 03:21:14.535399+00', '2026-12-01 03:21:15.547716+00', '2026-12-01 03:21:15.530986+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 2, "operation_id": "signup_cdac44dc8d0053dccb0dfabb33d0c0ce"}', '{vm_2026_12_01T03_21_11_626509,vm_2026_12_01T03_21_11_626509,vm_2026_12_01T03_21_11_626509}', '{"{\"at\": \"2026-12-01T03:21:14.584929683Z\", \"error\": \"saga: signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace attempt failed: workspace provider could not delete\", \"trace\": \"\", \"attempt\": 1}","{\"at\": \"2026-12-01T03:21:15.043300803Z\", \"error\": \"saga: signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace attempt failed: workspace provider could not delete\", \"trace\": \"\", \"attempt\": 2}"}', 'saga.compensate', '{}', 'saga', '{saga,demo_signup}', '\x624b92489531abf86fb8530313b7e852055e338db3597acfbcb5cc04fb92cb3f', B'11110101');
INSERT INTO public.river_job VALUES (19, 'completed', 1, 5, '2026-12-01 03:21:15.642248+00', '2026-12-01 03:21:15.588581+00', '2026-12-01 03:21:15.656624+00', '2026-12-01 03:21:15.588581+00', 1, '{"step": "account", "type": "demo_signup", "generation": 1, "operation_id": "signup_fdfa4950b69c26fc6ce14923f73bc420"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x44c0414bf8598b4ac7802e3fd8bd0506ae6c90a554dbaf6b3e45c12d654ebbf9', B'11110101');
INSERT INTO public.river_job VALUES (20, 'completed', 1, 5, '2026-12-01 03:21:15.801403+00', '2026-12-01 03:21:15.655926+00', '2026-12-01 03:21:15.816592+00', '2026-12-01 03:21:15.655926+00', 1, '{"step": "workspace", "type": "demo_signup", "generation": 1, "operation_id": "signup_fdfa4950b69c26fc6ce14923f73bc420"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x0e85578ee1db785029b37fbb5fb12f9075989249bcc7177ab915bffe1fadce67', B'11110101');
INSERT INTO public.river_job VALUES (21, 'completed', 1, 6, '2026-12-01 03:21:15.90212+00', '2026-12-01 03:21:15.814732+00', '2026-12-01 03:21:15.916109+00', '2026-12-01 03:21:15.814732+00', 1, '{"step": "welcome", "type": "demo_signup", "generation": 1, "operation_id": "signup_fdfa4950b69c26fc6ce14923f73bc420"}', '{vm_2026_12_01T03_21_11_626509}', NULL, 'saga.step', '{}', 'saga', '{saga,demo_signup}', '\x3cdbaffb3d1fb837206f6c64cfbeab409ca62b33014049d93679dfec777b693a', B'11110101');


--
-- Data for Name: river_leader; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: river_migration; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.river_migration VALUES ('main', 1, '2026-12-01 03:21:11.156174+00');
INSERT INTO public.river_migration VALUES ('main', 2, '2026-12-01 03:21:11.170623+00');
INSERT INTO public.river_migration VALUES ('main', 3, '2026-12-01 03:21:11.199897+00');
INSERT INTO public.river_migration VALUES ('main', 4, '2026-12-01 03:21:11.206677+00');
INSERT INTO public.river_migration VALUES ('main', 5, '2026-12-01 03:21:11.218606+00');
INSERT INTO public.river_migration VALUES ('main', 6, '2026-12-01 03:21:11.263171+00');
INSERT INTO public.river_migration VALUES ('main', 7, '2026-12-01 03:21:11.274721+00');
INSERT INTO public.river_migration VALUES ('main', 8, '2026-12-01 03:21:11.295487+00');


--
-- Data for Name: river_notification; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: river_queue; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.river_queue VALUES ('saga', '2026-12-01 03:21:11.636373+00', '{}', NULL, '2026-12-01 03:21:11.636373+00');


--
-- Data for Name: sessions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sessions VALUES ('bm_0c_kMk_UoAd8Yg5_kLVhz0DQ_VueP6pR4nL9oXGQ', '\x257f030102ff800001020108446561646c696e6501ff8200010656616c75657301ff8400000010ff810501010454696d6501ff8200000027ff83040101176d61705b737472696e675d696e74657266616365207b7d01ff8400010c011000003eff80010f010000000ee2a0dcec0bfe3958ffff010204726f6c6506737472696e670c0800066f6e63616c6c07757365725f696405696e7436340402000400', '2026-12-01 03:51:16.201363+00', 2);
INSERT INTO public.sessions VALUES ('ynVnx_cE7gBKCM-5kFkWjPQehwRJ4G22Zlmse-wUIOE', '\x257f030102ff800001020108446561646c696e6501ff8200010656616c75657301ff8400000010ff810501010454696d6501ff8200000027ff83040101176d61705b737472696e675d696e74657266616365207b7d01ff8400010c011000003fff80010f010000000ee2a0dcec112813c2ffff010207757365725f696405696e7436340402000804726f6c6506737472696e670c09000761756469746f7200', '2026-12-01 03:51:16.287984+00', 4);


--
-- Data for Name: unstuck_audit_checkpoint; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: unstuck_audit_entry; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_audit_entry VALUES (1, '2026-12-01 03:21:16.048012+00', 'oncall', 'oncall', 'key.confirm_happened', 'key', '16', 'the provider shows the charge', '{"attempts":1,"correlation_id":"ord_000003","external_ref":"shop-pay-3006e35c10ddc0d0a1cbd82a18f98386","fence":16,"id":16,"key_digest":"3006e35c10ddc0d0a1cbd82a18f983865f7ce8afff75bd9309221adb2714e97e","last_error":"provider did not answer: provider timed out","operation":"POST /shop/payments","scope":"user:demo:bob","status":"pending","updated_at":"2026-12-01T03:21:11.763279Z","version":3}', '{"attempts":1,"correlation_id":"ord_000003","external_ref":"ch_fixture_confirmed","fence":16,"id":16,"key_digest":"3006e35c10ddc0d0a1cbd82a18f983865f7ce8afff75bd9309221adb2714e97e","last_error":"confirmed by an operator: the effect happened; no response to replay. the provider shows the charge","operation":"POST /shop/payments","scope":"user:demo:bob","status":"completed","updated_at":"2026-12-01T03:21:16.042139Z","version":4}', 'applied', 'fixture-req', '127.0.0.1', 'fixture', '\x0000000000000000000000000000000000000000000000000000000000000000', '\x7c50369dd5b84bd928c8a9351a7066795880d7fbbec3ce10e9e3f8c7e591c40d', '384afa3db7cf59cf');
INSERT INTO public.unstuck_audit_entry VALUES (2, '2026-12-01 03:21:16.054892+00', 'oncall', 'oncall', 'key.confirm_not_happened', 'key', '15', 'the provider has no such charge', '{"attempts":1,"correlation_id":"ord_000003","external_ref":"shop-pay-fde7e17ce4cb5884079c8788d1699b7e","fence":15,"id":15,"key_digest":"fde7e17ce4cb5884079c8788d1699b7e0b65d3a55dcba711129f4d94f3d699dd","last_error":"provider did not answer: provider timed out after charging ch_000006","operation":"POST /shop/payments","scope":"user:demo:bob","status":"pending","updated_at":"2026-12-01T03:21:11.758593Z","version":3}', '{"deleted":true}', 'applied', 'fixture-req', '127.0.0.1', 'fixture', '\x7c50369dd5b84bd928c8a9351a7066795880d7fbbec3ce10e9e3f8c7e591c40d', '\x8961dd499567f1ad6cbaacc52e2a5640c4238d6a83a44ca64fbfdbb40597eb3a', '384afa3db7cf59cf');
INSERT INTO public.unstuck_audit_entry VALUES (3, '2026-12-01 03:21:16.066443+00', 'oncall', 'oncall', 'key.forget', 'key', '10', 'a stale form: refused and audited — refused: ops: the item changed since the page was rendered', '{"attempts":1,"correlation_id":"ord_000002","external_ref":"shop-pay-6a3e48be2cfe72a710627810fe07a663","fence":10,"id":10,"key_digest":"6a3e48be2cfe72a710627810fe07a66351b43fcbd3801cc30247e4669bc5912c","last_error":"provider did not answer: provider timed out","operation":"POST /shop/payments","scope":"user:demo:bob","status":"pending","updated_at":"2026-12-01T03:21:11.728192Z","version":3}', NULL, 'conflict', 'fixture-req', '127.0.0.1', 'fixture', '\x8961dd499567f1ad6cbaacc52e2a5640c4238d6a83a44ca64fbfdbb40597eb3a', '\xae47d6258abf6b587fdba9d2f28dcf9883c4e2251244e36e6574372cb7ff1b9a', '384afa3db7cf59cf');
INSERT INTO public.unstuck_audit_entry VALUES (4, '2026-12-01 03:21:16.073548+00', 'oncall', 'oncall', 'key.forget', 'key', '28', 'the receipt is sent again by hand', '{"attempts":1,"correlation_id":"","external_ref":"mail-receipt-fixture-2","fence":28,"id":28,"key_digest":"d43d87c0a4856616dc89607a6af4b76202b8048100498beba53e79bf4b518714","last_error":"json: unsupported value: NaN","operation":"demo:send-receipt","scope":"job:fixture","status":"unavailable","updated_at":"2026-12-01T03:21:16.030117Z","version":3}', '{"deleted":true}', 'applied', 'fixture-req', '127.0.0.1', 'fixture', '\xae47d6258abf6b587fdba9d2f28dcf9883c4e2251244e36e6574372cb7ff1b9a', '\xc4e10105e2adab76b34c037dc3fe75f1db09494e2d9a72e301ee2e3d3679fee0', '384afa3db7cf59cf');
INSERT INTO public.unstuck_audit_entry VALUES (5, '2026-12-01 03:21:16.075488+00', 'auditor', 'auditor', 'key.forget', 'key', '9', 'refused: the role may not do this', NULL, NULL, 'denied', '', '', '', '\xc4e10105e2adab76b34c037dc3fe75f1db09494e2d9a72e301ee2e3d3679fee0', '\x279a857f76bfa850f7ac3525749a0e62b2bb612817d6a35058520357d52e2dac', '384afa3db7cf59cf');
INSERT INTO public.unstuck_audit_entry VALUES (6, '2026-12-01 03:21:16.085009+00', 'oncall', 'oncall', 'operation.resolve', 'operation', 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'the workspace was deleted by its owner', '{"correlation_id":"idem:2b670bbebda4","current_step":"welcome","id":"signup_2b670bbebda495f4e0bb8e33606df0b1","last_error":"missing_external: we record step workspace completed (ws_000002) but the external system has no such effect","resolution":"","review_reason":"reconciliation_finding","status":"review_required","steps":[{"attempts":1,"external_id":"acct_86fe2858afd86937","name":"account","status":"completed"},{"attempts":1,"external_id":"ws_000002","name":"workspace","status":"completed"},{"attempts":1,"external_id":"msg_000002","name":"welcome","status":"completed"}],"type":"demo_signup","updated_at":"2026-12-01T03:21:16.003061Z","version":8}', '{"correlation_id":"idem:2b670bbebda4","current_step":"welcome","id":"signup_2b670bbebda495f4e0bb8e33606df0b1","last_error":"missing_external: we record step workspace completed (ws_000002) but the external system has no such effect","resolution":"the workspace was deleted by its owner","review_reason":"","status":"completed","steps":[{"attempts":1,"external_id":"acct_86fe2858afd86937","name":"account","status":"completed"},{"attempts":1,"external_id":"ws_000002","name":"workspace","status":"completed"},{"attempts":1,"external_id":"msg_000002","name":"welcome","status":"completed"}],"type":"demo_signup","updated_at":"2026-12-01T03:21:16.079571Z","version":9}', 'applied', 'fixture-req', '127.0.0.1', 'fixture', '\x279a857f76bfa850f7ac3525749a0e62b2bb612817d6a35058520357d52e2dac', '\x9d2e47445f02992fc64411e8417608da46b1fe22edff32c58c34c4cc72821f55', '384afa3db7cf59cf');


--
-- Data for Name: unstuck_console_user; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_console_user OVERRIDING SYSTEM VALUE VALUES (1, 'admin', 'admin', '$argon2id$v=19$m=19456,t=2,p=1$I8ZyHNiXY3Vyyi4ZXlH3iw$OHz6qRiZbaJtKIJGDhCQdf4drQ3IDKhQ3BTdY4T5mw4', false, '2026-12-01 03:21:11.478644+00', '2026-12-01 03:21:11.478644+00');
INSERT INTO public.unstuck_console_user OVERRIDING SYSTEM VALUE VALUES (2, 'oncall', 'oncall', '$argon2id$v=19$m=19456,t=2,p=1$wHfhQvJnxCmbCr1KkdlD4w$qzB71QjYUH6K1nyKasU0/O2uZKpbZUpZib+1X+nH+Io', false, '2026-12-01 03:21:11.526987+00', '2026-12-01 03:21:11.526987+00');
INSERT INTO public.unstuck_console_user OVERRIDING SYSTEM VALUE VALUES (3, 'support', 'support', '$argon2id$v=19$m=19456,t=2,p=1$lwnlQKHoBk2EjFNpLG8GPQ$S38td3iPizQm1D5NfHeXibIaoAJRcyxJjugt7ejedSo', false, '2026-12-01 03:21:11.559612+00', '2026-12-01 03:21:11.559612+00');
INSERT INTO public.unstuck_console_user OVERRIDING SYSTEM VALUE VALUES (4, 'auditor', 'auditor', '$argon2id$v=19$m=19456,t=2,p=1$TsPhjs4ELt4EdJm4E5Z1BA$sAAi0LChbuwZiJx0ZASEUo/BY6rmqYfKJORX3Yj0eUc', false, '2026-12-01 03:21:11.585098+00', '2026-12-01 03:21:11.585098+00');
INSERT INTO public.unstuck_console_user OVERRIDING SYSTEM VALUE VALUES (5, 'ada', 'oncall', '$argon2id$v=19$m=19456,t=2,p=1$wWl+bId8k/xIkMKzzbRmaQ$574USIpHa7wch7mNe/iSL9qQ4g+208kCLTpcZDM/13k', false, '2026-12-01 03:21:16.151441+00', '2026-12-01 03:21:16.151441+00');


--
-- Data for Name: unstuck_demo; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_demo VALUES ('2026-12-01 03:21:11.050693+00');


--
-- Data for Name: unstuck_idem_record; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (1, 'user:demo:alice', 'POST /shop/orders', '9eb6a4ee22edadf0f9faac3879134176824a966e01c6518dfc2c9bef8f1340de', 'be46719d3a4dee03987ce77ba88f523576eea737261be3422a8cb0b9e4a1fef5', 'completed', '\x5553017d8c430a79ec8798daac3cab12d08419103956771739417b98b56996c914eef34ad4df307eb6c620e5392ce7bc4012b7b90852e0f2e382e7d0ae5c83908a8453711f7875989f1d04fb70064ea9ac4c68c44134e05a1dce93332602015b43ff261a8bf5f5d2cfab0cc5816a1e3edac9c6adf77467b9fd95315f67d6cc98ca269e3263f96b62a41ddcd28e0538446b19600df4e4adf9079a9434b5f2c3ecf98adc28c454312fc095534a2957cb30796ccf6a84c1af03377bc2e1a54e7cedf29dbe7be1effdedb8739f97f925359e818a92', 201, '', '', '{order:ord_000001}', '', 'de7f145010af7f9f91c4bf8883e2d488', 1, NULL, 1, 3, '2026-12-01 03:21:11.646751+00', '2026-12-01 03:21:11.654904+00', '2026-12-02 03:21:11.646751+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (2, 'user:demo:bob', 'POST /shop/payments', 'bfc503ec97b3fe79656ae382de2583f77720a270f13682171d90a8b6056a6213', '2000991cb07f5048a21b27e70c6da5b492d24541fdeedea9ba2ff53189e38612', 'completed', '\x5553017d8c430a17a8c8a568a722136be18372cf7d4c90a1746376ca0f2994e69608e52b1c7135530ffa8c9825b33f13087e3633564bb89c3ac8ca7bcab3571305a84a980f847052ae3a3e6f323be0b76d106cff5f20087fdcb6ae39a350a198fc9d5f1e5c5bda1706c823fdff578d1dc34708c97f713211aab0072250fb2a93307694e28f345f8e5f1404dcdcbd53383e488ed418167702e9f25935d67d45865d1e808f51b2e509b88b66ef7add6fc42b026725332b5a730ce327839e2b8990ef201bbcbf86ffae57296312f0', 201, 'ord_000001', 'ch_000001', '{payment:pay_000001}', '', '5a62bcf98b0745f0760e06ebff2be9e2', 2, NULL, 1, 4, '2026-12-01 03:21:11.659254+00', '2026-12-01 03:21:11.664559+00', '2026-12-02 03:21:11.659254+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (3, 'user:demo:bob', 'POST /shop/payments', 'e0a168ea641967492b3b3758bac8603193e28c0c32d2e1fcdd49b773effcbe88', '1a9c7f5bb621a4af2c9808f0bd093ed1ee49a12c84a33e30396446261b28459d', 'pending', NULL, 202, 'ord_000001', 'shop-pay-e0a168ea641967492b3b3758bac86031', '{}', 'provider did not answer: provider timed out after charging ch_000002', '5dae6379d629f61d3ebb1606dd26c099', 3, NULL, 1, 3, '2026-12-01 03:21:11.666958+00', '2026-12-01 03:21:11.670685+00', '2026-12-02 03:21:11.666958+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (4, 'user:demo:bob', 'POST /shop/payments', '37ad2e279bd9564c6e2c04e151f6c2d7c68676f179c5eb133606c3244ebf686a', '793d3458da2b776b6f64c414df94c79fc6cccfc3d0e3913b260093143d10e4dc', 'pending', NULL, 202, 'ord_000001', 'shop-pay-37ad2e279bd9564c6e2c04e151f6c2d7', '{}', 'provider did not answer: provider timed out', 'd1ab1266a49b225a3e53c3e7034fafd3', 4, NULL, 1, 3, '2026-12-01 03:21:11.675123+00', '2026-12-01 03:21:11.682649+00', '2026-12-02 03:21:11.675123+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (5, 'user:demo:bob', 'POST /shop/payments', '5207253a23611693d124489f1f95754717c0fedc2cc6088757b6e894d329ea46', 'f63656a2714ccd48a7e728a62df27e9131557d90ae4ad6f86dadf6b41c6f69d3', 'failed', '\x5553017d8c430a035a869259ab706dd8c645489e73e8dba473f86f7eb56d34ed112afc23172b7f709d2b06ac4bff73d37e153ae9cc891fe2e8c61d090a53e5aa732b520d6780f712658fe6979818e0fa591f6f1c1b52758a5a325b867f17404ea4360642ef5a9cb2fade6e247b1975f23e74d7442c9aba7755463eac92fbd01e6ca9a86509ead4ea34687559adbe0d0ecc1df22817becbf14f6622a0e96e86714185a45fdc8a0368c9ed1cd8eee9a3473633b79758fd8226a45cb9315a50fa9f8f6b7818adde32c1d7c2c8186427f7983c54c65a36f2dde1f7223232ea286b24fe05d4c809a1a61bb07a7e76a10f304d2b2b3769ff75341377b1737dca93ed4d058e1e4d6e138754baf8c17c75caeb2c0daadca2235c19', 402, 'ord_000001', 'shop-pay-5207253a23611693d124489f1f957547', '{}', '', 'e5e2d546b621d74a442547b8fdd3e747', 5, NULL, 1, 3, '2026-12-01 03:21:11.687046+00', '2026-12-01 03:21:11.694714+00', '2026-12-02 03:21:11.687046+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (7, 'user:demo:alice', 'POST /shop/orders', '70940b77b85fb001998d0afacee96f7959dc3abb74eed8fa590eca7abbb584c9', '6f08fd4ba196c84c94bcfc6fa53d72dfac42526a8217fb385b932257c921616e', 'completed', '\x5553017d8c430ada200c1cb691b1c2e4ddbf55fee894339eb877580318f5b22f8846ba638199cdf0b8ffce3e6260ca89bc615c10fa2805b09882f674fe153ed4c97772f62eec6398c1acb9208dc66d8333d9ff05fffb148f2e37809c1df61e28a839c5697d9398f8df4ef611deb79ee9a424781676d8af4f0610c3c9cc12409ed1f9cafb4235471d868380a1a0eeec6b2be41f027e6538aeb30b807ba5cef8f0ab9a040d5180c5a7b1dd8f7b11b693054e3360caf297c2d967af95fe06e9b959c178c8906b66f7aa60009d2b315482fde89aef7e', 201, '', '', '{order:ord_000002}', '', 'ba26178c1c41a3f0169ef7471c3bf954', 7, NULL, 1, 3, '2026-12-01 03:21:11.698075+00', '2026-12-01 03:21:11.699072+00', '2026-12-02 03:21:11.698075+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (8, 'user:demo:bob', 'POST /shop/payments', '3e391ca51ec7ace91532d1adf5acc5e905139dbbc9aaa34c919c3ccef0ca72aa', '83b52c21d28a718fa49338f7326030d3080d0be830be1c244021f5d2a6a98a97', 'completed', '\x5553017d8c430a7eac12c8214902db6c909e4456fa05d17e068053d561ae0c33565b827dbe0c96d6d58a8b58ddf59c447bfce5aff2daf25472b5c00902859b4abc66e046bb177cc4ef6a05cdc17a4a5cbd2460028735ec1a60045c891ed0ffe9b74786b1be6d1d26bec9595d9ced82514fb77a00ef919edea11248069d9fafa65173e91f4a7de46817dc389d42d9189733591ab6367a2601823e68e0e36677e8876012066181e2e7a2a513ab1a52d602bbeb4003110e5f651f1a891b2eb26da68e5aa843a31bc4a2f04bfdab5a', 201, 'ord_000002', 'ch_000003', '{payment:pay_000003}', '', 'aa9a6ee9eb22dcc8e8e603eaa78cb83f', 8, NULL, 1, 4, '2026-12-01 03:21:11.699966+00', '2026-12-01 03:21:11.702452+00', '2026-12-02 03:21:11.699966+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (9, 'user:demo:bob', 'POST /shop/payments', '10fc2a47f581cdb3b9be0cc694af1962635aedbaa274930b1b024c62f374685b', 'd2a71f6cef1d0ba5cff06aaefdc6760ba25946b843bfb18ac8cf27a69c32a8cb', 'pending', NULL, 202, 'ord_000002', 'shop-pay-10fc2a47f581cdb3b9be0cc694af1962', '{}', 'provider did not answer: provider timed out after charging ch_000004', 'fbc433737d4ef0aae65c8c314602d7f0', 9, NULL, 1, 3, '2026-12-01 03:21:11.706429+00', '2026-12-01 03:21:11.718683+00', '2026-12-02 03:21:11.706429+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (10, 'user:demo:bob', 'POST /shop/payments', '6a3e48be2cfe72a710627810fe07a66351b43fcbd3801cc30247e4669bc5912c', '82d8defe15cec5948096ede3f40b9f203eb11d7853cd663def73075c36b7b186', 'pending', NULL, 202, 'ord_000002', 'shop-pay-6a3e48be2cfe72a710627810fe07a663', '{}', 'provider did not answer: provider timed out', '733ea8a2c3eec4e76f6e48109ac30063', 10, NULL, 1, 3, '2026-12-01 03:21:11.725702+00', '2026-12-01 03:21:11.728192+00', '2026-12-02 03:21:11.725702+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (11, 'user:demo:bob', 'POST /shop/payments', '80e65163464d0470cc0fe084349b7dab429e890314d4652207afc3a5e3480992', 'be858799283945bc633b9bee1776a2fd257989c2f542ddc41546ee6664eb3366', 'failed', '\x5553017d8c430a202ae22dac78b79dd1a176b0fd3fee4fa015ef1e12ae3337a6b7669e7b4a2701ef343b08b0da351d7187c3b3793eb31c5c8af458bce1515e325437d7eab93345ee7ec9a15ff3e8cf0760dbc89165e7a77bf03d743ce44a93b5077c729d8ea13ad2f29cf1c9f0efea030c06afa239f84d917945ac212dd72f081bab765f3f5178105d9e9c3b0307d2ca4972438dbbae5b2befe0909234d0296cf9b4628692be027540c129a2f53d86bafabe24ff2d6f1654a2753ad43042c8f30c6d8ab62f990c8382dc340e089a96fd3c8265341f618fe042984187b5519b956435b7330f127d44e8ba5f11873b88a5ee45469d4af2b6eecf889d14296970bf1ab1f8fcea193bd2b2ac2c13f23ac8964aaca327cafd42', 402, 'ord_000002', 'shop-pay-80e65163464d0470cc0fe084349b7dab', '{}', '', 'b13c38f5c88f5c69331c51d04d0b0914', 11, NULL, 1, 3, '2026-12-01 03:21:11.729176+00', '2026-12-01 03:21:11.730412+00', '2026-12-02 03:21:11.729176+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (13, 'user:demo:alice', 'POST /shop/orders', 'a772563c274f8e8557323bd8f6d90a09503fdbcc44ab4444bbc6253ab9f8b3fc', 'da3e60295db4b17d67f640e973bd53188d714f6ebbd85e77457b4e5637e94b20', 'completed', '\x5553017d8c430ab9a7e7b2b16e9ecc2b9c9e51ed01597a8d12755d1563ae7686545fa584d8c25bdd9a1b1379b735dcee80887aa249854060fbc0cb5b6ab617211d70409c411fac469d072fce165adda09264b5c49025aca6f3e6bd3456be02fc65c06af13f9d1f12a638289eeef5a8539bb2c8decc0a4e762c794a1adae89429efbb863f35d614524e2ee4d43c9ba959dcb1d6a81b0b9a1981ffc877e17afdab1d1b05728b90ae670c76e8ee5bfc910b3377b7712eea087a4247ea9bf02c5a2597efd6703d4e5fd4259ee41477554ea14bd52361', 201, '', '', '{order:ord_000003}', '', '49a2453e08429674629450eaf78b0c06', 13, NULL, 1, 3, '2026-12-01 03:21:11.736859+00', '2026-12-01 03:21:11.738249+00', '2026-12-02 03:21:11.736859+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (14, 'user:demo:bob', 'POST /shop/payments', '184704090e82158e6dce0992ca93be08dac41419e687421ac9e553f5da52ba5e', '2d16ed878503a2c2e04e0285470da7e7f7ca0f6fd78c7e14da8e484cf5cb550a', 'completed', '\x5553017d8c430abdc0a6d258b6ac6f75d6856fdaa010ab596518aa1229b6c6728a381814c57e44005497bd091b66a3c376ff4af9900938a341eef293de6f56c1362ca584c3cd21bc2b695fbb1313d39b34cd85cfde28e4dbe4df16750bbd64085733f1bd06b93fadf1f035715db2192fff5c69f69a5e73c2aede19c6a186cfd6c08f3e52b2cee7bbfb3dd424bb4063b60cf36d8ed09642a898cb0f6e3be1d1e0f220c3b75455a5f13240ea2ea1bad93f5fbd8cf36ab2d362c9db57ecd31cb30f3c5f40397e5d4b274b6373ecd4', 201, 'ord_000003', 'ch_000005', '{payment:pay_000005}', '', '740315fb1708b6e4b3131a3524dc4c59', 14, NULL, 1, 4, '2026-12-01 03:21:11.739792+00', '2026-12-01 03:21:11.74662+00', '2026-12-02 03:21:11.739792+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (29, 'job:fixture', 'demo:nightly-export', 'fe85a6591190cd7202b4b64184afb19a99c4a0db622ffc0dbaa783aa2f665077', '', 'processing', NULL, 0, 'batch-demo:nightly-export', '', '{}', '', 'aa66594e91a6e5a0e47082f2b71f4e65', 29, '2026-12-02 03:21:16.031452+00', 1, 2, '2026-12-01 03:21:16.031452+00', '2026-12-01 03:21:16.033304+00', '2026-12-02 03:21:16.031452+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (17, 'user:demo:bob', 'POST /shop/payments', 'd585de244be8c18b060e48c13bcfd5fb9b2a8e1e796351859b2134eb69b4684d', '5cdcf5521d6083e24d765dd232d79a0b114007de94c664ecace64806b459e7a9', 'failed', '\x5553017d8c430ad20e55bfd49a1e2e1911f5c8a70194d8597f9e825d7db00dc5f0df1e529f99a878a78ed396a8600809c83f18c18653b3061e6f62c5777b43c318c34de8087a1aba0f8e936a5fc6f136c817fe9d5c1fa848e689af1c0fccb481cae643a87e470d56748b23c509e775bd27306c96f6935ffb8200b25b7ddf820fbadb6781fe91b47fb3d2218ac5ae8ae2504e1cab93b831b15b89f727a28efe5a4948ce1756d7d41a2927df49ccd4e8b1fde2c0588377940f8aa9cded117a4dbc636b0ba17d617142c0c6300734e0af4de3070ba75693ea6e68481951eea9dd0e778d09cebf62c722b03d591c828e2b760ab8d5b4556ab530a778d273c4f0002b5b7d12e7823aee7c84aa6808e5901912acdd0a55bae0ba', 402, 'ord_000003', 'shop-pay-d585de244be8c18b060e48c13bcfd5fb', '{}', '', 'd6d425c707f879c6526fb6d25c423fa9', 17, NULL, 1, 3, '2026-12-01 03:21:11.76491+00', '2026-12-01 03:21:11.769958+00', '2026-12-02 03:21:11.76491+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (19, 'ip:127.0.0.1', 'POST /shop/exports', '28b3305c602ab05c2f5abedd1b0eda1b31e4cf868dc5148eaf56774006cfde8e', '138c7c76e53b7570fd6bb592c94652e3132be7c4311611c144102329f282b725', 'completed', '\x5553017d8c430a2f1a8054a53d0489e70e91025feabe0d73bc90ec34bfde03014db50037a85f05505b46c6494b31c38a061eaacb6681e2da44ee43a4f07296140c1c2a7a93a03c055b7d977e5b25dcd1cac7dcf1e8e9fb785c5cdb7c687c467f3738e77452997ef66ac46ab2233f916515c3fc75d5d6359e7e5b8625e5a2fc5156969806572b46dc8260e83e9f17002cbf46a39653a9b88fa5462dadb896b27c30713f6e23c5c54e4b2a0fb3d78bcf00b5caa8fd28294cc37277c11c', 201, '', '', '{}', '', 'bf293c6f436f2a866faab1f95f440bc2', 19, NULL, 1, 2, '2026-12-01 03:21:11.785287+00', '2026-12-01 03:21:11.810378+00', '2026-12-01 04:21:11.785287+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (20, 'ip:127.0.0.1', 'POST /shop/signups', '1dc3844d7ac0a6163ecbd3f9eb7601919deb5bd3ba875ca26bab6d0460adc40e', '06cf6fea683a3bfe83e8df90257ecf7d6a7b30c62a2acca083c727b52f51066a', 'completed', '\x5553017d8c430aa62d7fe4d7949c497a6680c58da227aed14da13ae28939775fb5e48f79f252079aef0153ea5d53f0a720763443ac7d4f424511c6705266ec225f7f820e2a0d0b5d19b9970e69ea21f7506c57a040bd8ab39a3f0bdabc1626c8a5cc0fbae33a99b19dc8053051003447cd86ddd53ae57e038133139bfc6fdf8df03041faf37bf459884ff2aa3eed1084a9f8b2e9e926825b8abbef4d8b14fa9b4e42d187abfb07ccc4612fb139dd18040bdbe9bfb4fce6fe33612b9943a471dc949aa798eba1014757eacb79061b380392239370a5ac601205ba30', 202, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', '', '{operation:signup_1dc3844d7ac0a6163ecbd3f9eb760191}', '', 'd5228574b7eda9b4f1d277039a611222', 20, NULL, 1, 3, '2026-12-01 03:21:11.813132+00', '2026-12-01 03:21:11.834849+00', '2026-12-02 03:21:11.813132+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (21, 'ip:127.0.0.1', 'POST /shop/signups', '2b670bbebda495f4e0bb8e33606df0b1bfa37546a8a8b8b69c0cc736e43567a9', '25807f443caf9ee8d18d49992be0f8217e5471d929af994692ae0f07cdf92a36', 'completed', '\x5553017d8c430ac47aa37e0cc68155c0fcac4c3f47ec92e82b30833e560d2dc02d2864d89e14da0d86b4dba045b9af44a161b28280ec94add5fe80a1e0565aa038d34c8db94c87ae91e9d12a633427c4167ce5112d2278bd21088b35064a3a22735f4f6178ab75500ae56d254cf728d79878ccf4f8a2b140a5412561af76b27ff5e5969b6c5ffcb5f820602ff084164f3d37932b6242bbccc2d7fc9f7c7fd4314e4d9664aa7a774347fdb416d4c1ff9e972a482dd77a2bf3affde078cd7268deb9afc70e9b4870e018b1fe06b616daa067ca6aa2c76637139eb73a', 202, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', '{operation:signup_2b670bbebda495f4e0bb8e33606df0b1}', '', 'cf950da2e1428cfe68c7c6297069f3b3', 21, NULL, 1, 3, '2026-12-01 03:21:12.050233+00', '2026-12-01 03:21:12.060438+00', '2026-12-02 03:21:12.050233+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (22, 'ip:127.0.0.1', 'POST /shop/signups', '1bd9535d1f41bd92c96600a6580eebb937879bc21f7e1ebbc95c8d20e0048380', '06cf6fea683a3bfe83e8df90257ecf7d6a7b30c62a2acca083c727b52f51066a', 'completed', '\x5553017d8c430aa7640b14314b9c510f71bd2c9814a3bb468fd182a2c7a5f48aeec1438395ca964d638bef57de47452c3ef04f247dfb91a51ab5263f6c752c20e0722dbfa0cb1bae5cef594e5f74be913f18ba0a7d9918399b12ec0dc4be850c5501bef3720ad92376428fa7c8a106f3a32a9255241815f39f80cc666d6b69eeb203b43459d04138961030f21ce1dfad85769ff2c48923c440b1cd17716aac2f022b860404c65a9e07827399d99f74d32049617c13f437f90970eeb59044d130e7b7d726ff92553f186ab0b50689206e1669115fc796b16108f5b5', 202, 'signup_1bd9535d1f41bd92c96600a6580eebb9', '', '{operation:signup_1bd9535d1f41bd92c96600a6580eebb9}', '', '18bf2d47894c94457f3691094ef1626c', 22, NULL, 1, 3, '2026-12-01 03:21:12.377524+00', '2026-12-01 03:21:12.382533+00', '2026-12-02 03:21:12.377524+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (23, 'ip:127.0.0.1', 'POST /shop/signups', '3a4d0b314a0759f73052328690139f56366bbfaebd11f59bd9f12f80ec858b51', '8b5a9b9a1240c3e8b7bffa221ea5751aa55e78a04ab0d6a7dcbbc262a463e1c3', 'completed', '\x5553017d8c430a544623f4f09bd4089064d7f89b3aff531c3717345568d6ee8f276ab73fd8c37c6b8e94965f63eac147abdddc8fa1300a647e0fd805ed96f2a2c8d22736b3a51ff0c296951fee7aad3b6e50af6bdc2633f6142a4fb8648600ebb8ee20f5cff6a9d7cbc4d0ff1a0500d996cfb0660a899cd76e3364dae5e8949d14fa2a4f528f9d523fe5ea74eb0e3623c0407c607df8a7276a42f94b464b2c613db36ae4b3667a831a0c396b7ca0b7e19aa976a3f4ae8950627c35effed96ce918908e4d603dd372b6694f7af94123020f3da528abfd7dc1f1301a', 202, 'signup_3a4d0b314a0759f73052328690139f56', '', '{operation:signup_3a4d0b314a0759f73052328690139f56}', '', '805e0fd87e94569f4af791a80f2632f2', 23, NULL, 1, 3, '2026-12-01 03:21:12.491605+00', '2026-12-01 03:21:12.504386+00', '2026-12-02 03:21:12.491605+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (24, 'ip:127.0.0.1', 'POST /shop/signups', '8b8fd94b395cef8c77259c02189ceefc10b22b5beb6bb7c872a8d4b11f7cb214', 'eac23cd4e68af2f3e4ca879f24cf4d41e2787bb2bbb5c0eae979aa12d7658313', 'completed', '\x5553017d8c430a65452a781fc7c6a554667e9c60c1d3261386e4704679a3b486a6b6265555165530b01793d611e56979ad9827c12f331f97f102fa40cbf1d41728dd72e2dc0eb5e519939ef3378ddb440659563be0373fc800f9ab8802cdb4ed9b42fbd558c2c5aea6b0b414bef1627db3879d80279f00d28b37fe312650268d6a645f60392a50e4303bdbe864ff8caa4c3734847c2e401e9e95f8bb2c6fcbf3045106913c279ec426f194ae20d389cf0c9660470b2fdb041579afa6fe88422278fed0ed1eb8580d36a5208e8497ccd464e8c134acca9a43122725', 202, 'signup_8b8fd94b395cef8c77259c02189ceefc', '', '{operation:signup_8b8fd94b395cef8c77259c02189ceefc}', '', '0aa1bfe35c15ba80c996f23601ba01aa', 24, NULL, 1, 3, '2026-12-01 03:21:13.862437+00', '2026-12-01 03:21:13.895011+00', '2026-12-02 03:21:13.862437+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (25, 'ip:127.0.0.1', 'POST /shop/signups', 'cdac44dc8d0053dccb0dfabb33d0c0cea539bde7c8eba5e6ab3c1c11611ded15', 'd34705ae18751b151bf734f2e3b091e68a353e0b4eba914a412f877338d5d92f', 'completed', '\x5553017d8c430a22082c20fe5c942e4d3dc9c3313dadaa6f3576e2f0e03fdc478e0627784f0db2d530a2c0a1a7df5b73b3ea65596e1d36255647921bd89b4b19a8a1b4aa1a0e5aa5ee0a6e17da86e098961bdb0cf4dc256b618dbc545bba80636aad5dc5d7df6f4797cda9ba501dba25a6ed0fc209dd7a34522082baefdc141415eaff99ae8999823000906decd98fdc25a3fecda04e475310facdd4b0ab9a220f1e5a9327fc13b1d77b54c78ac10e363a323847668736da09ad1c2fdcde66c4d25aa1fbc3a5825504c0eb1b31d3247a831e1b3cd2b10c08a331fe', 202, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', '', '{operation:signup_cdac44dc8d0053dccb0dfabb33d0c0ce}', '', '04c3920aa893e886ea34f6c68f00eb82', 25, NULL, 1, 3, '2026-12-01 03:21:14.264999+00', '2026-12-01 03:21:14.278196+00', '2026-12-02 03:21:14.264999+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (26, 'ip:127.0.0.1', 'POST /shop/signups', 'fdfa4950b69c26fc6ce14923f73bc420956847c2f920dceaffbd4051dfcd7e11', '7cbee5c0bb87d7e592fd3cc9a3c11a10f85e20fd7579a574da4a34438acb8698', 'completed', '\x5553017d8c430a67f58c4a82d65b797491e9cc44c08edf316b9c423d05c8588ad40e90537bc58c9c000cb41d10e6105996e259b4326de4cf2eab4f59028cebf3332e41aedc248e5cd0f871a29dba17d1a6b5bb293e4ccf0abf5c0b3c7f4268bced3d87700f54d581a4cc9ac46b5551dfe56563fff8a5d5ef98a92fa51fd03f0566c6bcf911a2c9c5cf14093d8ce83c648be9899db08fccc71c555c31fe71bc712d315e530fa81ad7de7d082989195103b642cc26cd13d3ec3df923994889440e30e54ed57b7eb997adb9b7b9e43d70d7d2f99141cb0abfb586ff85', 202, 'signup_fdfa4950b69c26fc6ce14923f73bc420', '', '{operation:signup_fdfa4950b69c26fc6ce14923f73bc420}', '', 'c7b737d483224d7d983380e8e261358c', 26, NULL, 1, 3, '2026-12-01 03:21:15.574421+00', '2026-12-01 03:21:15.59538+00', '2026-12-02 03:21:15.574421+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (27, 'job:fixture', 'demo:send-receipt', 'd266641a18d39891e91f3fcab9b435fc92b2d8fa8a870a763bd7d6877f5f85c4', '', 'unavailable', NULL, 0, '', 'mail-receipt-fixture-1', '{receipt:receipt-fixture-1}', 'json: unsupported value: NaN', '5d485db75fae5c68ce21005b3a38a401', 27, NULL, 1, 3, '2026-12-01 03:21:16.017087+00', '2026-12-01 03:21:16.022749+00', '2026-12-02 03:21:16.017087+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (30, 'job:fixture', 'demo:stalled-sync', 'ab5f57be7a97e3ef9f23b00f42cfea0a44ee65ed08b580783879ca49ef873dff', '', 'processing', NULL, 0, 'batch-demo:stalled-sync', '', '{}', '', 'ab37990150048bd93e92bf380e89a050', 30, '2026-12-01 03:21:17.03593+00', 1, 2, '2026-12-01 03:21:16.03593+00', '2026-12-01 03:21:16.036715+00', '2026-12-02 03:21:16.03593+00');
INSERT INTO public.unstuck_idem_record OVERRIDING SYSTEM VALUE VALUES (16, 'user:demo:bob', 'POST /shop/payments', '3006e35c10ddc0d0a1cbd82a18f983865f7ce8afff75bd9309221adb2714e97e', '018eaa201f15794cda5d85b4578672af230193e9e2f6b74bfb54b2d8e6092600', 'completed', NULL, 202, 'ord_000003', 'ch_fixture_confirmed', '{}', 'confirmed by an operator: the effect happened; no response to replay. the provider shows the charge', '', 16, NULL, 1, 4, '2026-12-01 03:21:11.761297+00', '2026-12-01 03:21:16.042139+00', '2026-12-02 03:21:11.761297+00');


--
-- Data for Name: unstuck_migration; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_migration VALUES ('idem', 1, 'records', '2026-12-01 03:21:11.054864+00');
INSERT INTO public.unstuck_migration VALUES ('saga', 1, 'saga', '2026-12-01 03:21:11.098724+00');
INSERT INTO public.unstuck_migration VALUES ('saga', 2, 'finding_acceptance', '2026-12-01 03:21:11.098724+00');
INSERT INTO public.unstuck_migration VALUES ('console', 1, 'console', '2026-12-01 03:21:11.298888+00');
INSERT INTO public.unstuck_migration VALUES ('console', 2, 'processing_index', '2026-12-01 03:21:11.298888+00');
INSERT INTO public.unstuck_migration VALUES ('console', 3, 'session_user', '2026-12-01 03:21:11.298888+00');
INSERT INTO public.unstuck_migration VALUES ('console_operations', 1, 'operations', '2026-12-01 03:21:11.351118+00');
INSERT INTO public.unstuck_migration VALUES ('audit', 1, 'audit', '2026-12-01 03:21:11.374732+00');
INSERT INTO public.unstuck_migration VALUES ('audit', 2, 'keyed', '2026-12-01 03:21:11.374732+00');


--
-- Data for Name: unstuck_saga_event; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_saga_event VALUES (1, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', '', 'started', '', 'pending', 'app', 'correlation idem:1dc3844d7ac0', 0, '2026-12-01 03:21:11.818371+00');
INSERT INTO public.unstuck_saga_event VALUES (2, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:11.837462+00');
INSERT INTO public.unstuck_saga_event VALUES (3, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:11.837462+00');
INSERT INTO public.unstuck_saga_event VALUES (4, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_8a6a7648a2ea8c40', 1, '2026-12-01 03:21:11.844367+00');
INSERT INTO public.unstuck_saga_event VALUES (5, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:11.935397+00');
INSERT INTO public.unstuck_saga_event VALUES (6, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'workspace', 'step_completed', 'running', 'completed', 'worker', 'external id ws_000001', 1, '2026-12-01 03:21:11.943147+00');
INSERT INTO public.unstuck_saga_event VALUES (7, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'welcome', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.035367+00');
INSERT INTO public.unstuck_saga_event VALUES (8, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'welcome', 'step_completed', 'running', 'completed', 'worker', 'external id msg_000001', 1, '2026-12-01 03:21:12.042216+00');
INSERT INTO public.unstuck_saga_event VALUES (9, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191', '', 'status', 'running', 'completed', 'worker', 'every step completed', 0, '2026-12-01 03:21:12.042216+00');
INSERT INTO public.unstuck_saga_event VALUES (10, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'started', '', 'pending', 'app', 'correlation idem:2b670bbebda4', 0, '2026-12-01 03:21:12.051027+00');
INSERT INTO public.unstuck_saga_event VALUES (11, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:12.13437+00');
INSERT INTO public.unstuck_saga_event VALUES (12, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.13437+00');
INSERT INTO public.unstuck_saga_event VALUES (13, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_86fe2858afd86937', 1, '2026-12-01 03:21:12.137269+00');
INSERT INTO public.unstuck_saga_event VALUES (14, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.239464+00');
INSERT INTO public.unstuck_saga_event VALUES (15, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'workspace', 'step_completed', 'running', 'completed', 'worker', 'external id ws_000002', 1, '2026-12-01 03:21:12.246996+00');
INSERT INTO public.unstuck_saga_event VALUES (16, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'welcome', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.334951+00');
INSERT INTO public.unstuck_saga_event VALUES (17, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'welcome', 'step_completed', 'running', 'completed', 'worker', 'external id msg_000002', 1, '2026-12-01 03:21:12.338846+00');
INSERT INTO public.unstuck_saga_event VALUES (18, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'status', 'running', 'completed', 'worker', 'every step completed', 0, '2026-12-01 03:21:12.338846+00');
INSERT INTO public.unstuck_saga_event VALUES (19, 'signup_1bd9535d1f41bd92c96600a6580eebb9', '', 'started', '', 'pending', 'app', 'correlation idem:1bd9535d1f41', 0, '2026-12-01 03:21:12.378201+00');
INSERT INTO public.unstuck_saga_event VALUES (20, 'signup_1bd9535d1f41bd92c96600a6580eebb9', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:12.439243+00');
INSERT INTO public.unstuck_saga_event VALUES (21, 'signup_1bd9535d1f41bd92c96600a6580eebb9', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.439243+00');
INSERT INTO public.unstuck_saga_event VALUES (22, 'signup_1bd9535d1f41bd92c96600a6580eebb9', 'account', 'step_failed', 'running', 'failed', 'worker', 'permanent_failure: email ann@example.com already has the active account acct_8a6a7648a2ea8c40', 1, '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_event VALUES (23, 'signup_1bd9535d1f41bd92c96600a6580eebb9', 'workspace', 'step_skipped', 'pending', 'skipped', 'worker', '', 0, '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_event VALUES (24, 'signup_1bd9535d1f41bd92c96600a6580eebb9', 'welcome', 'step_skipped', 'pending', 'skipped', 'worker', '', 0, '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_event VALUES (25, 'signup_1bd9535d1f41bd92c96600a6580eebb9', '', 'status', 'running', 'failed', 'worker', 'step account failed after 1 attempt(s) (permanent_failure): email ann@example.com already has the active account acct_8a6a7648a2ea8c40; nothing to compensate', 0, '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_event VALUES (26, 'signup_3a4d0b314a0759f73052328690139f56', '', 'started', '', 'pending', 'app', 'correlation idem:3a4d0b314a07', 0, '2026-12-01 03:21:12.494651+00');
INSERT INTO public.unstuck_saga_event VALUES (27, 'signup_3a4d0b314a0759f73052328690139f56', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:12.538808+00');
INSERT INTO public.unstuck_saga_event VALUES (28, 'signup_3a4d0b314a0759f73052328690139f56', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.538808+00');
INSERT INTO public.unstuck_saga_event VALUES (29, 'signup_3a4d0b314a0759f73052328690139f56', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_ccd4e38a65b41c07', 1, '2026-12-01 03:21:12.547209+00');
INSERT INTO public.unstuck_saga_event VALUES (30, 'signup_3a4d0b314a0759f73052328690139f56', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:12.670598+00');
INSERT INTO public.unstuck_saga_event VALUES (31, 'signup_3a4d0b314a0759f73052328690139f56', 'workspace', 'step_uncertain', 'running', 'uncertain', 'worker', 'workspace provider timed out', 1, '2026-12-01 03:21:12.676856+00');
INSERT INTO public.unstuck_saga_event VALUES (32, 'signup_3a4d0b314a0759f73052328690139f56', 'workspace', 'verified', 'uncertain', 'completed', 'worker', 'verification found the effect: workspace ws_000003', 1, '2026-12-01 03:21:13.71384+00');
INSERT INTO public.unstuck_saga_event VALUES (33, 'signup_3a4d0b314a0759f73052328690139f56', 'welcome', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:13.812179+00');
INSERT INTO public.unstuck_saga_event VALUES (34, 'signup_3a4d0b314a0759f73052328690139f56', 'welcome', 'step_completed', 'running', 'completed', 'worker', 'external id msg_000003', 1, '2026-12-01 03:21:13.814512+00');
INSERT INTO public.unstuck_saga_event VALUES (35, 'signup_3a4d0b314a0759f73052328690139f56', '', 'status', 'running', 'completed', 'worker', 'every step completed', 0, '2026-12-01 03:21:13.814512+00');
INSERT INTO public.unstuck_saga_event VALUES (36, 'signup_8b8fd94b395cef8c77259c02189ceefc', '', 'started', '', 'pending', 'app', 'correlation idem:8b8fd94b395c', 0, '2026-12-01 03:21:13.879691+00');
INSERT INTO public.unstuck_saga_event VALUES (37, 'signup_8b8fd94b395cef8c77259c02189ceefc', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:13.913307+00');
INSERT INTO public.unstuck_saga_event VALUES (38, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:13.913307+00');
INSERT INTO public.unstuck_saga_event VALUES (39, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_7710a52af57a9cee', 1, '2026-12-01 03:21:13.916248+00');
INSERT INTO public.unstuck_saga_event VALUES (40, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:14.013571+00');
INSERT INTO public.unstuck_saga_event VALUES (41, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 'step_failed', 'running', 'failed', 'worker', 'permanent_failure: workspace ws_000004 created but activation refused', 1, '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_event VALUES (42, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'welcome', 'step_skipped', 'pending', 'skipped', 'worker', '', 0, '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_event VALUES (43, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 'compensation_planned', 'failed', 'compensating', 'worker', 'position 1', 1, '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_event VALUES (44, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 'compensation_planned', 'completed', 'compensating', 'worker', 'position 2', 1, '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_event VALUES (45, 'signup_8b8fd94b395cef8c77259c02189ceefc', '', 'status', 'running', 'compensating', 'worker', 'step workspace failed after 1 attempt(s) (permanent_failure): workspace ws_000004 created but activation refused; compensating [workspace account]', 0, '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_event VALUES (46, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 'compensation_begun', 'compensating', 'compensating', 'worker', '', 1, '2026-12-01 03:21:14.114565+00');
INSERT INTO public.unstuck_saga_event VALUES (47, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 'compensated', 'compensating', 'compensated', 'worker', '', 1, '2026-12-01 03:21:14.122993+00');
INSERT INTO public.unstuck_saga_event VALUES (48, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 'compensation_begun', 'compensating', 'compensating', 'worker', '', 1, '2026-12-01 03:21:14.226466+00');
INSERT INTO public.unstuck_saga_event VALUES (49, 'signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 'compensated', 'compensating', 'compensated', 'worker', '', 1, '2026-12-01 03:21:14.229227+00');
INSERT INTO public.unstuck_saga_event VALUES (50, 'signup_8b8fd94b395cef8c77259c02189ceefc', '', 'status', 'compensating', 'compensated', 'worker', 'every compensation completed', 0, '2026-12-01 03:21:14.229227+00');
INSERT INTO public.unstuck_saga_event VALUES (51, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', '', 'started', '', 'pending', 'app', 'correlation idem:cdac44dc8d00', 0, '2026-12-01 03:21:14.265776+00');
INSERT INTO public.unstuck_saga_event VALUES (52, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:14.326432+00');
INSERT INTO public.unstuck_saga_event VALUES (53, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:14.326432+00');
INSERT INTO public.unstuck_saga_event VALUES (54, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_36451ce265995467', 1, '2026-12-01 03:21:14.329306+00');
INSERT INTO public.unstuck_saga_event VALUES (55, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:14.499272+00');
INSERT INTO public.unstuck_saga_event VALUES (56, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'step_failed', 'running', 'failed', 'worker', 'permanent_failure: workspace ws_000005 created but activation refused', 1, '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_event VALUES (57, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'welcome', 'step_skipped', 'pending', 'skipped', 'worker', '', 0, '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_event VALUES (58, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_planned', 'failed', 'compensating', 'worker', 'position 1', 1, '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_event VALUES (59, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'account', 'compensation_planned', 'completed', 'compensating', 'worker', 'position 2', 1, '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_event VALUES (60, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', '', 'status', 'running', 'compensating', 'worker', 'step workspace failed after 1 attempt(s) (permanent_failure): workspace ws_000005 created but activation refused; compensating [workspace account]', 0, '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_event VALUES (61, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_begun', 'compensating', 'compensating', 'worker', '', 1, '2026-12-01 03:21:14.585559+00');
INSERT INTO public.unstuck_saga_event VALUES (62, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_retrying', 'compensating', 'compensating', 'worker', 'workspace provider could not delete', 1, '2026-12-01 03:21:14.592591+00');
INSERT INTO public.unstuck_saga_event VALUES (63, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_begun', 'compensating', 'compensating', 'worker', '', 2, '2026-12-01 03:21:15.043905+00');
INSERT INTO public.unstuck_saga_event VALUES (64, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_retrying', 'compensating', 'compensating', 'worker', 'workspace provider could not delete', 2, '2026-12-01 03:21:15.048078+00');
INSERT INTO public.unstuck_saga_event VALUES (65, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_begun', 'compensating', 'compensating', 'worker', '', 3, '2026-12-01 03:21:15.541899+00');
INSERT INTO public.unstuck_saga_event VALUES (66, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 'compensation_failed', 'compensating', 'compensation_failed', 'worker', 'workspace provider could not delete', 3, '2026-12-01 03:21:15.547011+00');
INSERT INTO public.unstuck_saga_event VALUES (67, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce', '', 'status', 'compensating', 'review_required', 'worker', 'compensation_failed: compensation of step workspace failed after 3 attempt(s): workspace provider could not delete (external id "ws_000005")', 0, '2026-12-01 03:21:15.547011+00');
INSERT INTO public.unstuck_saga_event VALUES (68, 'signup_fdfa4950b69c26fc6ce14923f73bc420', '', 'started', '', 'pending', 'app', 'correlation idem:fdfa4950b69c', 0, '2026-12-01 03:21:15.584759+00');
INSERT INTO public.unstuck_saga_event VALUES (69, 'signup_fdfa4950b69c26fc6ce14923f73bc420', '', 'status', 'pending', 'running', 'worker', '', 0, '2026-12-01 03:21:15.647676+00');
INSERT INTO public.unstuck_saga_event VALUES (70, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'account', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:15.647676+00');
INSERT INTO public.unstuck_saga_event VALUES (71, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'account', 'step_completed', 'running', 'completed', 'worker', 'external id acct_46bc3ae0975e4cce', 1, '2026-12-01 03:21:15.654647+00');
INSERT INTO public.unstuck_saga_event VALUES (72, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'workspace', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:15.805135+00');
INSERT INTO public.unstuck_saga_event VALUES (73, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'workspace', 'step_completed', 'running', 'completed', 'worker', 'external id ws_000006', 1, '2026-12-01 03:21:15.813106+00');
INSERT INTO public.unstuck_saga_event VALUES (74, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'welcome', 'step_begun', 'pending', 'running', 'worker', '', 1, '2026-12-01 03:21:15.910483+00');
INSERT INTO public.unstuck_saga_event VALUES (75, 'signup_fdfa4950b69c26fc6ce14923f73bc420', 'welcome', 'step_failed', 'running', 'failed', 'worker', 'permanent_failure: mailer: mailbox nobody@example.com does not exist', 1, '2026-12-01 03:21:15.91517+00');
INSERT INTO public.unstuck_saga_event VALUES (76, 'signup_fdfa4950b69c26fc6ce14923f73bc420', '', 'status', 'running', 'review_required', 'worker', 'permanent_failure: step welcome failed after 1 attempt(s) (permanent_failure): mailer: mailbox nobody@example.com does not exist', 0, '2026-12-01 03:21:15.91517+00');
INSERT INTO public.unstuck_saga_event VALUES (77, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'status', 'completed', 'review_required', 'reconciler', 'reconciliation_finding: missing_external: we record step workspace completed (ws_000002) but the external system has no such effect', 0, '2026-12-01 03:21:16.003061+00');
INSERT INTO public.unstuck_saga_event VALUES (78, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'workspace', 'finding', '', '', 'reconciler', 'missing_external: we record step workspace completed (ws_000002) but the external system has no such effect', 0, '2026-12-01 03:21:16.003061+00');
INSERT INTO public.unstuck_saga_event VALUES (79, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'operator_resolve', 'review_required', 'completed', 'operator:oncall', 'the workspace was deleted by its owner', 0, '2026-12-01 03:21:16.079571+00');
INSERT INTO public.unstuck_saga_event VALUES (80, 'signup_2b670bbebda495f4e0bb8e33606df0b1', '', 'status', 'review_required', 'completed', 'operator:oncall', 'resolved by operator', 0, '2026-12-01 03:21:16.079571+00');


--
-- Data for Name: unstuck_saga_finding; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_saga_finding VALUES (1, 'signup_2b670bbebda495f4e0bb8e33606df0b1', 'workspace', 'missing_external', 'ws_000002', 'we record step workspace completed (ws_000002) but the external system has no such effect', '2026-12-01 03:21:15.981592+00', '2026-12-01 03:21:16.079571+00', 'missing_external workspace: we record completed ("ws_000002"); the external system says not_applied ("")', 'operator:oncall', NULL);


--
-- Data for Name: unstuck_saga_operation; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_saga_operation VALUES ('signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'demo_signup', 'completed', 'idem:1dc3844d7ac0', '{"email": "ann@example.com"}', 'welcome', '', '', '', 7, '2026-12-01 03:21:11.818371+00', '2026-12-01 03:21:12.042216+00', '2026-12-01 03:21:12.042216+00');
INSERT INTO public.unstuck_saga_operation VALUES ('signup_1bd9535d1f41bd92c96600a6580eebb9', 'demo_signup', 'failed', 'idem:1bd9535d1f41', '{"email": "ann@example.com"}', 'account', 'step account failed after 1 attempt(s) (permanent_failure): email ann@example.com already has the active account acct_8a6a7648a2ea8c40', '', '', 3, '2026-12-01 03:21:12.378201+00', '2026-12-01 03:21:12.443548+00', '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_operation VALUES ('signup_3a4d0b314a0759f73052328690139f56', 'demo_signup', 'completed', 'idem:3a4d0b314a07', '{"fail": "workspace_timeout_after_effect", "email": "slow@example.com"}', 'welcome', '', '', '', 8, '2026-12-01 03:21:12.494651+00', '2026-12-01 03:21:13.814512+00', '2026-12-01 03:21:13.814512+00');
INSERT INTO public.unstuck_saga_operation VALUES ('signup_8b8fd94b395cef8c77259c02189ceefc', 'demo_signup', 'compensated', 'idem:8b8fd94b395c', '{"fail": "workspace_permanent", "email": "perm@example.com"}', 'account', 'step workspace failed after 1 attempt(s) (permanent_failure): workspace ws_000004 created but activation refused', '', '', 9, '2026-12-01 03:21:13.879691+00', '2026-12-01 03:21:14.229227+00', '2026-12-01 03:21:14.229227+00');
INSERT INTO public.unstuck_saga_operation VALUES ('signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'demo_signup', 'review_required', 'idem:cdac44dc8d00', '{"fail": "workspace_compensation_fails", "email": "stuck@example.com"}', 'workspace', 'compensation of step workspace failed after 3 attempt(s): workspace provider could not delete (external id "ws_000005")', 'compensation_failed', '', 11, '2026-12-01 03:21:14.265776+00', '2026-12-01 03:21:15.547011+00', NULL);
INSERT INTO public.unstuck_saga_operation VALUES ('signup_fdfa4950b69c26fc6ce14923f73bc420', 'demo_signup', 'review_required', 'idem:fdfa4950b69c', '{"fail": "welcome_permanent", "email": "nobody@example.com"}', 'welcome', 'step welcome failed after 1 attempt(s) (permanent_failure): mailer: mailbox nobody@example.com does not exist', 'permanent_failure', '', 7, '2026-12-01 03:21:15.584759+00', '2026-12-01 03:21:15.91517+00', NULL);
INSERT INTO public.unstuck_saga_operation VALUES ('signup_2b670bbebda495f4e0bb8e33606df0b1', 'demo_signup', 'completed', 'idem:2b670bbebda4', '{"email": "drift@example.com"}', 'welcome', 'missing_external: we record step workspace completed (ws_000002) but the external system has no such effect', '', 'the workspace was deleted by its owner', 9, '2026-12-01 03:21:12.051027+00', '2026-12-01 03:21:16.079571+00', '2026-12-01 03:21:16.079571+00');


--
-- Data for Name: unstuck_saga_step; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.unstuck_saga_step VALUES ('signup_3a4d0b314a0759f73052328690139f56', 'workspace', 1, 'pivot', 'workspace-provider', 'completed', 'signup_3a4d0b314a0759f73052328690139f56/workspace', 'ws_000003', NULL, 1, 4, 1, '', '', true, 2, 'signup_3a4d0b314a0759f73052328690139f56/workspace/compensate', '', 0, 3, '', 2, '2026-12-01 03:21:12.670598+00', '2026-12-01 03:21:13.71384+00', '2026-12-01 03:21:13.71384+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1bd9535d1f41bd92c96600a6580eebb9', 'account', 0, 'compensatable', 'local', 'failed', 'signup_1bd9535d1f41bd92c96600a6580eebb9/account', '', NULL, 1, 4, 0, 'email ann@example.com already has the active account acct_8a6a7648a2ea8c40', 'permanent', true, 3, 'signup_1bd9535d1f41bd92c96600a6580eebb9/account/compensate', '', 0, 4, '', 1, '2026-12-01 03:21:12.439243+00', '2026-12-01 03:21:12.443548+00', '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1bd9535d1f41bd92c96600a6580eebb9', 'workspace', 1, 'pivot', 'workspace-provider', 'skipped', 'signup_1bd9535d1f41bd92c96600a6580eebb9/workspace', '', NULL, 0, 4, 0, '', '', true, 2, 'signup_1bd9535d1f41bd92c96600a6580eebb9/workspace/compensate', '', 0, 3, '', 0, NULL, '2026-12-01 03:21:12.443548+00', '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1bd9535d1f41bd92c96600a6580eebb9', 'welcome', 2, 'retriable', 'mailer', 'skipped', 'signup_1bd9535d1f41bd92c96600a6580eebb9/welcome', '', NULL, 0, 5, 0, '', '', false, 1, 'signup_1bd9535d1f41bd92c96600a6580eebb9/welcome/compensate', '', 0, 5, '', 0, NULL, '2026-12-01 03:21:12.443548+00', '2026-12-01 03:21:12.443548+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'account', 0, 'compensatable', 'local', 'completed', 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/account', 'acct_8a6a7648a2ea8c40', NULL, 1, 4, 0, '', '', true, 3, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/account/compensate', '', 0, 4, '', 1, '2026-12-01 03:21:11.837462+00', '2026-12-01 03:21:11.844367+00', '2026-12-01 03:21:11.844367+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'workspace', 1, 'pivot', 'workspace-provider', 'completed', 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/workspace', 'ws_000001', NULL, 1, 4, 0, '', '', true, 2, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/workspace/compensate', '', 0, 3, '', 1, '2026-12-01 03:21:11.935397+00', '2026-12-01 03:21:11.943147+00', '2026-12-01 03:21:11.943147+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_1dc3844d7ac0a6163ecbd3f9eb760191', 'welcome', 2, 'retriable', 'mailer', 'completed', 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/welcome', 'msg_000001', NULL, 1, 5, 0, '', '', false, 1, 'signup_1dc3844d7ac0a6163ecbd3f9eb760191/welcome/compensate', '', 0, 5, '', 1, '2026-12-01 03:21:12.035367+00', '2026-12-01 03:21:12.042216+00', '2026-12-01 03:21:12.042216+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_2b670bbebda495f4e0bb8e33606df0b1', 'workspace', 1, 'pivot', 'workspace-provider', 'completed', 'signup_2b670bbebda495f4e0bb8e33606df0b1/workspace', 'ws_000002', NULL, 1, 4, 0, '', '', true, 2, 'signup_2b670bbebda495f4e0bb8e33606df0b1/workspace/compensate', '', 0, 3, '', 1, '2026-12-01 03:21:12.239464+00', '2026-12-01 03:21:12.246996+00', '2026-12-01 03:21:12.246996+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_2b670bbebda495f4e0bb8e33606df0b1', 'welcome', 2, 'retriable', 'mailer', 'completed', 'signup_2b670bbebda495f4e0bb8e33606df0b1/welcome', 'msg_000002', NULL, 1, 5, 0, '', '', false, 1, 'signup_2b670bbebda495f4e0bb8e33606df0b1/welcome/compensate', '', 0, 5, '', 1, '2026-12-01 03:21:12.334951+00', '2026-12-01 03:21:12.338846+00', '2026-12-01 03:21:12.338846+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_3a4d0b314a0759f73052328690139f56', 'welcome', 2, 'retriable', 'mailer', 'completed', 'signup_3a4d0b314a0759f73052328690139f56/welcome', 'msg_000003', NULL, 1, 5, 0, '', '', false, 1, 'signup_3a4d0b314a0759f73052328690139f56/welcome/compensate', '', 0, 5, '', 1, '2026-12-01 03:21:13.812179+00', '2026-12-01 03:21:13.814512+00', '2026-12-01 03:21:13.814512+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_8b8fd94b395cef8c77259c02189ceefc', 'welcome', 2, 'retriable', 'mailer', 'skipped', 'signup_8b8fd94b395cef8c77259c02189ceefc/welcome', '', NULL, 0, 5, 0, '', '', false, 1, 'signup_8b8fd94b395cef8c77259c02189ceefc/welcome/compensate', '', 0, 5, '', 0, NULL, '2026-12-01 03:21:14.02728+00', '2026-12-01 03:21:14.02728+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_3a4d0b314a0759f73052328690139f56', 'account', 0, 'compensatable', 'local', 'completed', 'signup_3a4d0b314a0759f73052328690139f56/account', 'acct_ccd4e38a65b41c07', NULL, 1, 4, 0, '', '', true, 3, 'signup_3a4d0b314a0759f73052328690139f56/account/compensate', '', 0, 4, '', 1, '2026-12-01 03:21:12.538808+00', '2026-12-01 03:21:12.547209+00', '2026-12-01 03:21:12.547209+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_8b8fd94b395cef8c77259c02189ceefc', 'account', 0, 'compensatable', 'local', 'compensated', 'signup_8b8fd94b395cef8c77259c02189ceefc/account', 'acct_7710a52af57a9cee', NULL, 1, 4, 0, '', '', true, 3, 'signup_8b8fd94b395cef8c77259c02189ceefc/account/compensate', 'completed', 1, 4, '', 2, '2026-12-01 03:21:13.913307+00', '2026-12-01 03:21:14.229227+00', '2026-12-01 03:21:14.229227+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_8b8fd94b395cef8c77259c02189ceefc', 'workspace', 1, 'pivot', 'workspace-provider', 'compensated', 'signup_8b8fd94b395cef8c77259c02189ceefc/workspace', 'ws_000004', NULL, 1, 4, 0, 'workspace ws_000004 created but activation refused', 'permanent', true, 2, 'signup_8b8fd94b395cef8c77259c02189ceefc/workspace/compensate', 'completed', 1, 3, '', 2, '2026-12-01 03:21:14.013571+00', '2026-12-01 03:21:14.122993+00', '2026-12-01 03:21:14.122993+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'account', 0, 'compensatable', 'local', 'compensating', 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/account', 'acct_36451ce265995467', NULL, 1, 4, 0, '', '', true, 3, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/account/compensate', 'pending', 0, 4, '', 1, '2026-12-01 03:21:14.326432+00', '2026-12-01 03:21:14.329306+00', '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'workspace', 1, 'pivot', 'workspace-provider', 'compensation_failed', 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace', 'ws_000005', NULL, 1, 4, 0, 'workspace ws_000005 created but activation refused', 'permanent', true, 2, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/workspace/compensate', 'failed', 3, 3, 'workspace provider could not delete', 2, '2026-12-01 03:21:14.499272+00', '2026-12-01 03:21:15.547011+00', '2026-12-01 03:21:15.547011+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_cdac44dc8d0053dccb0dfabb33d0c0ce', 'welcome', 2, 'retriable', 'mailer', 'skipped', 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/welcome', '', NULL, 0, 5, 0, '', '', false, 1, 'signup_cdac44dc8d0053dccb0dfabb33d0c0ce/welcome/compensate', '', 0, 5, '', 0, NULL, '2026-12-01 03:21:14.528278+00', '2026-12-01 03:21:14.528278+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_fdfa4950b69c26fc6ce14923f73bc420', 'account', 0, 'compensatable', 'local', 'completed', 'signup_fdfa4950b69c26fc6ce14923f73bc420/account', 'acct_46bc3ae0975e4cce', NULL, 1, 4, 0, '', '', true, 3, 'signup_fdfa4950b69c26fc6ce14923f73bc420/account/compensate', '', 0, 4, '', 1, '2026-12-01 03:21:15.647676+00', '2026-12-01 03:21:15.654647+00', '2026-12-01 03:21:15.654647+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_2b670bbebda495f4e0bb8e33606df0b1', 'account', 0, 'compensatable', 'local', 'completed', 'signup_2b670bbebda495f4e0bb8e33606df0b1/account', 'acct_86fe2858afd86937', NULL, 1, 4, 0, '', '', true, 3, 'signup_2b670bbebda495f4e0bb8e33606df0b1/account/compensate', '', 0, 4, '', 1, '2026-12-01 03:21:12.13437+00', '2026-12-01 03:21:12.137269+00', '2026-12-01 03:21:12.137269+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_fdfa4950b69c26fc6ce14923f73bc420', 'workspace', 1, 'pivot', 'workspace-provider', 'completed', 'signup_fdfa4950b69c26fc6ce14923f73bc420/workspace', 'ws_000006', NULL, 1, 4, 0, '', '', true, 2, 'signup_fdfa4950b69c26fc6ce14923f73bc420/workspace/compensate', '', 0, 3, '', 1, '2026-12-01 03:21:15.805135+00', '2026-12-01 03:21:15.813106+00', '2026-12-01 03:21:15.813106+00');
INSERT INTO public.unstuck_saga_step VALUES ('signup_fdfa4950b69c26fc6ce14923f73bc420', 'welcome', 2, 'retriable', 'mailer', 'failed', 'signup_fdfa4950b69c26fc6ce14923f73bc420/welcome', '', NULL, 1, 5, 0, 'mailer: mailbox nobody@example.com does not exist', 'permanent', false, 1, 'signup_fdfa4950b69c26fc6ce14923f73bc420/welcome/compensate', '', 0, 5, '', 1, '2026-12-01 03:21:15.910483+00', '2026-12-01 03:21:15.91517+00', '2026-12-01 03:21:15.91517+00');


--
-- Name: river_job_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.river_job_id_seq', 21, true);


--
-- Name: river_notification_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.river_notification_id_seq', 1, false);


--
-- Name: unstuck_audit_checkpoint_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_audit_checkpoint_id_seq', 1, false);


--
-- Name: unstuck_console_user_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_console_user_id_seq', 5, true);


--
-- Name: unstuck_idem_fence_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_idem_fence_seq', 30, true);


--
-- Name: unstuck_idem_record_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_idem_record_id_seq', 30, true);


--
-- Name: unstuck_saga_event_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_saga_event_id_seq', 80, true);


--
-- Name: unstuck_saga_finding_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.unstuck_saga_finding_id_seq', 1, true);


--
-- Name: demo_account demo_account_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.demo_account
    ADD CONSTRAINT demo_account_key_key UNIQUE (key);


--
-- Name: demo_account demo_account_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.demo_account
    ADD CONSTRAINT demo_account_pkey PRIMARY KEY (id);


--
-- Name: demo_workspace demo_workspace_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.demo_workspace
    ADD CONSTRAINT demo_workspace_pkey PRIMARY KEY (key);


--
-- Name: river_job river_job_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_job
    ADD CONSTRAINT river_job_pkey PRIMARY KEY (id);


--
-- Name: river_leader river_leader_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_leader
    ADD CONSTRAINT river_leader_pkey PRIMARY KEY (name);


--
-- Name: river_migration river_migration_pkey1; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_migration
    ADD CONSTRAINT river_migration_pkey1 PRIMARY KEY (line, version);


--
-- Name: river_notification river_notification_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_notification
    ADD CONSTRAINT river_notification_pkey PRIMARY KEY (id);


--
-- Name: river_queue river_queue_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.river_queue
    ADD CONSTRAINT river_queue_pkey PRIMARY KEY (name);


--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (token);


--
-- Name: unstuck_audit_checkpoint unstuck_audit_checkpoint_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_audit_checkpoint
    ADD CONSTRAINT unstuck_audit_checkpoint_pkey PRIMARY KEY (id);


--
-- Name: unstuck_audit_entry unstuck_audit_entry_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_audit_entry
    ADD CONSTRAINT unstuck_audit_entry_hash_key UNIQUE (hash);


--
-- Name: unstuck_audit_entry unstuck_audit_entry_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_audit_entry
    ADD CONSTRAINT unstuck_audit_entry_pkey PRIMARY KEY (seq);


--
-- Name: unstuck_audit_entry unstuck_audit_entry_prev_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_audit_entry
    ADD CONSTRAINT unstuck_audit_entry_prev_hash_key UNIQUE (prev_hash);


--
-- Name: unstuck_console_user unstuck_console_user_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_console_user
    ADD CONSTRAINT unstuck_console_user_pkey PRIMARY KEY (id);


--
-- Name: unstuck_console_user unstuck_console_user_username_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_console_user
    ADD CONSTRAINT unstuck_console_user_username_key UNIQUE (username);


--
-- Name: unstuck_idem_record unstuck_idem_record_ident_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_idem_record
    ADD CONSTRAINT unstuck_idem_record_ident_key UNIQUE (scope, operation, key_digest);


--
-- Name: unstuck_idem_record unstuck_idem_record_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_idem_record
    ADD CONSTRAINT unstuck_idem_record_pkey PRIMARY KEY (id);


--
-- Name: unstuck_migration unstuck_migration_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_migration
    ADD CONSTRAINT unstuck_migration_pkey PRIMARY KEY (line, version);


--
-- Name: unstuck_saga_event unstuck_saga_event_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_event
    ADD CONSTRAINT unstuck_saga_event_pkey PRIMARY KEY (id);


--
-- Name: unstuck_saga_finding unstuck_saga_finding_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_finding
    ADD CONSTRAINT unstuck_saga_finding_pkey PRIMARY KEY (id);


--
-- Name: unstuck_saga_operation unstuck_saga_operation_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_operation
    ADD CONSTRAINT unstuck_saga_operation_pkey PRIMARY KEY (id);


--
-- Name: unstuck_saga_step unstuck_saga_step_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_step
    ADD CONSTRAINT unstuck_saga_step_pkey PRIMARY KEY (operation_id, name);


--
-- Name: demo_account_active_email; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX demo_account_active_email ON public.demo_account USING btree (email) WHERE (status = 'active'::text);


--
-- Name: river_job_args_index; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_job_args_index ON public.river_job USING gin (args);


--
-- Name: river_job_kind; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_job_kind ON public.river_job USING btree (kind);


--
-- Name: river_job_metadata_index; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_job_metadata_index ON public.river_job USING gin (metadata);


--
-- Name: river_job_prioritized_fetching_index; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_job_prioritized_fetching_index ON public.river_job USING btree (state, queue, priority, scheduled_at, id);


--
-- Name: river_job_state_and_finalized_at_index; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_job_state_and_finalized_at_index ON public.river_job USING btree (state, finalized_at) WHERE (finalized_at IS NOT NULL);


--
-- Name: river_job_unique_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX river_job_unique_idx ON public.river_job USING btree (unique_key) WHERE ((unique_key IS NOT NULL) AND (unique_states IS NOT NULL) AND public.river_job_state_in_bitmask(unique_states, state));


--
-- Name: river_notification_created_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_notification_created_at_idx ON public.river_notification USING btree (created_at);


--
-- Name: river_notification_topic_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX river_notification_topic_id_idx ON public.river_notification USING btree (topic, id);


--
-- Name: sessions_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sessions_expiry_idx ON public.sessions USING btree (expiry);


--
-- Name: unstuck_audit_entry_action_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_audit_entry_action_idx ON public.unstuck_audit_entry USING btree (action, seq);


--
-- Name: unstuck_audit_entry_actor_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_audit_entry_actor_idx ON public.unstuck_audit_entry USING btree (actor, seq);


--
-- Name: unstuck_audit_entry_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_audit_entry_at_idx ON public.unstuck_audit_entry USING btree (at);


--
-- Name: unstuck_audit_entry_outcome_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_audit_entry_outcome_idx ON public.unstuck_audit_entry USING btree (outcome, seq);


--
-- Name: unstuck_audit_entry_target_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_audit_entry_target_idx ON public.unstuck_audit_entry USING btree (target_kind, target_id, seq);


--
-- Name: unstuck_console_idem_operation_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_idem_operation_idx ON public.unstuck_idem_record USING btree (operation, updated_at, id);


--
-- Name: unstuck_console_idem_processing_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_idem_processing_idx ON public.unstuck_idem_record USING btree (updated_at, id) INCLUDE (lease_expires_at) WHERE (status = 'processing'::text);


--
-- Name: unstuck_console_idem_processing_scope_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_idem_processing_scope_idx ON public.unstuck_idem_record USING btree (scope, updated_at, id) INCLUDE (lease_expires_at) WHERE (status = 'processing'::text);


--
-- Name: unstuck_console_idem_scope_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_idem_scope_idx ON public.unstuck_idem_record USING btree (scope, updated_at, id);


--
-- Name: unstuck_console_idem_updated_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_idem_updated_idx ON public.unstuck_idem_record USING btree (updated_at, id);


--
-- Name: unstuck_console_saga_finding_operation_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_saga_finding_operation_idx ON public.unstuck_saga_finding USING btree (operation_id, id);


--
-- Name: unstuck_console_saga_operation_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_saga_operation_status_idx ON public.unstuck_saga_operation USING btree (status, updated_at, id);


--
-- Name: unstuck_console_saga_operation_type_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_saga_operation_type_idx ON public.unstuck_saga_operation USING btree (type, updated_at, id);


--
-- Name: unstuck_console_saga_operation_updated_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_saga_operation_updated_idx ON public.unstuck_saga_operation USING btree (updated_at, id);


--
-- Name: unstuck_console_saga_step_external_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_console_saga_step_external_idx ON public.unstuck_saga_step USING btree (external_id) WHERE (external_id <> ''::text);


--
-- Name: unstuck_idem_record_correlation_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_idem_record_correlation_id_idx ON public.unstuck_idem_record USING btree (correlation_id) WHERE (correlation_id <> ''::text);


--
-- Name: unstuck_idem_record_expires_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_idem_record_expires_at_idx ON public.unstuck_idem_record USING btree (expires_at);


--
-- Name: unstuck_idem_record_external_ref_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_idem_record_external_ref_idx ON public.unstuck_idem_record USING btree (external_ref) WHERE (external_ref <> ''::text);


--
-- Name: unstuck_idem_record_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_idem_record_status_idx ON public.unstuck_idem_record USING btree (status, updated_at, id);


--
-- Name: unstuck_saga_event_operation_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_saga_event_operation_idx ON public.unstuck_saga_event USING btree (operation_id, id);


--
-- Name: unstuck_saga_finding_open_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX unstuck_saga_finding_open_idx ON public.unstuck_saga_finding USING btree (operation_id, step, kind) WHERE (resolved_at IS NULL);


--
-- Name: unstuck_saga_finding_operation_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_saga_finding_operation_idx ON public.unstuck_saga_finding USING btree (operation_id, id);


--
-- Name: unstuck_saga_operation_correlation_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_saga_operation_correlation_idx ON public.unstuck_saga_operation USING btree (correlation_id) WHERE (correlation_id <> ''::text);


--
-- Name: unstuck_saga_operation_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_saga_operation_status_idx ON public.unstuck_saga_operation USING btree (status, updated_at);


--
-- Name: unstuck_saga_step_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX unstuck_saga_step_status_idx ON public.unstuck_saga_step USING btree (status, updated_at);


--
-- Name: unstuck_audit_entry unstuck_audit_entry_keyed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER unstuck_audit_entry_keyed BEFORE INSERT ON public.unstuck_audit_entry FOR EACH ROW EXECUTE FUNCTION public.unstuck_audit_entry_keyed();


--
-- Name: unstuck_audit_entry unstuck_audit_entry_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER unstuck_audit_entry_no_truncate BEFORE TRUNCATE ON public.unstuck_audit_entry FOR EACH STATEMENT EXECUTE FUNCTION public.unstuck_audit_entry_append_only();


--
-- Name: unstuck_audit_entry unstuck_audit_entry_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER unstuck_audit_entry_no_update_delete BEFORE DELETE OR UPDATE ON public.unstuck_audit_entry FOR EACH ROW EXECUTE FUNCTION public.unstuck_audit_entry_append_only();


--
-- Name: unstuck_saga_event unstuck_saga_event_operation_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_event
    ADD CONSTRAINT unstuck_saga_event_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES public.unstuck_saga_operation(id) ON DELETE CASCADE;


--
-- Name: unstuck_saga_finding unstuck_saga_finding_operation_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_finding
    ADD CONSTRAINT unstuck_saga_finding_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES public.unstuck_saga_operation(id) ON DELETE CASCADE;


--
-- Name: unstuck_saga_step unstuck_saga_step_operation_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.unstuck_saga_step
    ADD CONSTRAINT unstuck_saga_step_operation_id_fkey FOREIGN KEY (operation_id) REFERENCES public.unstuck_saga_operation(id) ON DELETE CASCADE;


--
-- PostgreSQL database dump complete
--

\unrestrict 33wtPAJh1S4L7UvT8h5wOFtRmyhKfzJm9d5wlhfI8PuTWQeM4uHuksDPyZ5QYSj

