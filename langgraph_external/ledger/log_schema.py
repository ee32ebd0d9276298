"""The ledger's Merkle log of head moves (migration v14, issue 35).

v14: the auditor's proof (issue 35). Every head move appends a leaf — thread, seq,
head hash, time — to one append-only Merkle log per deployment (RFC 9162 hashing,
``langgraph_external/proof/verify.py``), inside ``advance_thread``, so in the
transaction that moves the head and from nothing but the head itself. The log's
right edge (``frontier``: one subtree root per set bit of the size) gives its root
without reading a leaf. The sealing side signs tree heads with an Ed25519 key the
database never sees; ``store_signed_head`` takes only a head of the log as it is
now. The application role can append only through ``advance_thread`` and store
heads only through ``store_signed_head`` (``lgx setup --roles``).

The leaf bytes and hashes are the verifier's (``langgraph_external/proof/verify.py``:
``leaf_bytes``, ``leaf_hash``, ``node_hash``); ``tests/test_auditor_proof.py`` checks that
the two agree.
"""

from __future__ import annotations

__all__ = ["LOG_MIGRATION"]

LOG_MIGRATION = """
    create table if not exists {schema}.log_state (
        one boolean primary key default true check (one),
        origin text not null,
        size bigint not null default 0,
        frontier bytea[] not null default '{{}}'
    );
    insert into {schema}.log_state (origin)
    values ('langgraph-external/' || replace(gen_random_uuid()::text, '-', ''))
    on conflict do nothing;
    create table if not exists {schema}.log_leaves (
        idx bigint primary key,
        thread_id text not null,
        seq bigint not null,
        head_hash text not null,
        ts timestamptz not null,
        leaf_hash bytea not null
    );
    create index if not exists log_leaves_thread_idx on {schema}.log_leaves (thread_id, seq);
    create table if not exists {schema}.signed_heads (
        key_name text not null,
        key_hash bigint not null,
        size bigint not null,
        root bytea not null,
        signed_at timestamptz not null,
        note text not null,
        primary key (key_name, key_hash, size)
    );
    create table if not exists {schema}.log_keys (
        key text primary key,
        added_at timestamptz not null default now()
    );
    create or replace function {schema}.log_leaf(
        p_thread text, p_seq bigint, p_hash text, p_ts timestamptz
    ) returns bytea language sql immutable
    set search_path = pg_catalog, pg_temp as $$
        select convert_to('lgx-head/1' || E'\\n'
            || octet_length(convert_to(p_thread, 'UTF8'))::text || ':' || p_thread || E'\\n'
            || p_seq::text || E'\\n' || coalesce(p_hash, '') || E'\\n'
            || ((extract(epoch from p_ts) * 1000000)::bigint)::text || E'\\n', 'UTF8')
    $$;
    create or replace function {schema}.log_append(
        p_thread text, p_seq bigint, p_hash text, p_ts timestamptz
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    declare
        n bigint;
        f bytea[];
        h bytea;
        k bigint;
    begin
        -- the row lock orders appends: the log grows in the order heads commit
        select size, frontier into n, f from {schema}.log_state where one for update;
        h := sha256('\\x00'::bytea || {schema}.log_leaf(p_thread, p_seq, p_hash, p_ts));
        insert into {schema}.log_leaves (idx, thread_id, seq, head_hash, ts, leaf_hash)
        values (n, p_thread, p_seq, coalesce(p_hash, ''), p_ts, h);
        k := n;
        while k & 1 = 1 loop
            h := sha256('\\x01'::bytea || f[cardinality(f)] || h);
            f := f[1:cardinality(f) - 1];
            k := k >> 1;
        end loop;
        update {schema}.log_state set size = n + 1, frontier = f || h where one;
    end
    $$;
    create or replace function {schema}.log_root(p_frontier bytea[]) returns bytea
    language plpgsql immutable
    set search_path = pg_catalog, pg_temp as $$
    declare
        acc bytea;
        i int;
    begin
        if cardinality(p_frontier) = 0 then
            return sha256(''::bytea);
        end if;
        acc := p_frontier[cardinality(p_frontier)];
        for i in reverse cardinality(p_frontier) - 1 .. 1 loop
            acc := sha256('\\x01'::bytea || p_frontier[i] || acc);
        end loop;
        return acc;
    end
    $$;
    create or replace function {schema}.store_signed_head(
        p_key_name text, p_key_hash bigint, p_size bigint, p_root bytea,
        p_signed_at timestamptz, p_note text
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    declare
        n bigint;
        f bytea[];
    begin
        select size, frontier into n, f from {schema}.log_state where one;
        if n <> p_size or {schema}.log_root(f) <> p_root then
            raise exception using errcode = 'LX003', message = format(
                'a signed head of %s leaves is not the log as it is (%s leaves)', p_size, n);
        end if;
        insert into {schema}.signed_heads (key_name, key_hash, size, root, signed_at, note)
        values (p_key_name, p_key_hash, p_size, p_root, p_signed_at, p_note)
        on conflict do nothing;
    end
    $$;
    -- the log held still while a head is signed (appends wait for the signer's commit)
    create or replace function {schema}.log_snapshot()
    returns table (origin text, size bigint, frontier bytea[])
    language sql security definer
    set search_path = pg_catalog, pg_temp as $$
        select s.origin, s.size, s.frontier from {schema}.log_state s where s.one for share
    $$;
    create or replace function {schema}.register_log_key(p_key text) returns void
    language sql security definer
    set search_path = pg_catalog, pg_temp as $$
        insert into {schema}.log_keys (key) values (p_key) on conflict do nothing
    $$;
    create or replace function {schema}.advance_thread(
        p_thread text, p_expected bigint, p_prev text, p_seq bigint, p_hash text,
        p_ts timestamptz, p_mac text
    ) returns void language plpgsql security definer
    set search_path = pg_catalog, pg_temp as $$
    begin
        if p_expected = 0 then
            insert into {schema}.threads as t
                (thread_id, created_at, updated_at, last_seq, last_hash, head_mac)
            values (p_thread, p_ts, p_ts, p_seq, p_hash, p_mac)
            on conflict (thread_id) do update
                set last_seq = excluded.last_seq, last_hash = excluded.last_hash,
                    head_mac = excluded.head_mac,
                    updated_at = greatest(t.updated_at, excluded.updated_at)
                where t.last_seq = 0;
        else
            update {schema}.threads
                set last_seq = p_seq, last_hash = p_hash, head_mac = p_mac,
                    updated_at = greatest(updated_at, p_ts)
                where thread_id = p_thread and last_seq = p_expected
                  and last_hash is not distinct from p_prev;
        end if;
        if not found then
            raise exception using errcode = 'LX001', message = format(
                'thread %s is no longer at seq %s: another writer recorded it first',
                p_thread, p_expected);
        end if;
        perform {schema}.log_append(p_thread, p_seq, p_hash, p_ts);
    end
    $$;
    -- the heads recorded before: the log's first leaves, oldest move first
    do $$
    declare
        h record;
    begin
        if not exists (select 1 from {schema}.log_leaves) then
            for h in select thread_id, last_seq, last_hash, updated_at from {schema}.threads
                     where last_seq > 0 and last_hash is not null
                     order by updated_at, thread_id loop
                perform {schema}.log_append(h.thread_id, h.last_seq, h.last_hash,
                                            h.updated_at);
            end loop;
        end if;
    end
    $$;
    """
