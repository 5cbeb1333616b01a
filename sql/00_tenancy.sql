-- Tenant context and API-key authentication.

create or replace function tortus.current_tenant() returns text
language sql stable parallel safe
return nullif(current_setting('tortus.tenant', true), '');

comment on function tortus.current_tenant() is
'The tenant this transaction is scoped to (set with set_config(''tortus.tenant'', id, true)), '
'or NULL when none is set; row-level security shows no tenant rows then.';

create or replace function tortus.key_hash(api_key text) returns text
language sql immutable strict parallel safe
return encode(sha256(convert_to(api_key, 'UTF8')), 'hex');

comment on function tortus.key_hash(text) is
'SHA-256 (hex) of an API key as stored in tortus.api_key.key_hash; keys are random 256-bit '
'secrets, so a fast hash is enough and the plain key is never stored.';

-- The key itself never travels to the server: with log_statement = 'all' a parameter holding it
-- would be written to the server's log. Clients send its SHA-256.
drop function if exists tortus.authenticate(text);

create or replace function tortus.authenticate_hash(key_hash text)
returns table (tenant_id text, key_id bigint, scopes text[])
language sql stable strict security definer
set search_path = pg_catalog, pg_temp
as $$
    select k.tenant_id, k.key_id, k.scopes
    from tortus.api_key k
    where k.key_hash = authenticate_hash.key_hash and k.revoked_at is null
$$;

comment on function tortus.authenticate_hash(text) is
'The tenant, key id and scopes of a valid, unrevoked API key given by its SHA-256 (hex); no row '
'otherwise. Runs as the schema owner because the caller does not yet know its tenant.';

revoke all on function tortus.authenticate_hash(text) from public;
grant execute on function tortus.authenticate_hash(text) to tortus_app;

create or replace function tortus.enter_tenant(key_hash text) returns text
language plpgsql volatile strict security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    found text;
begin
    select k.tenant_id into found from tortus.api_key k
    where k.key_hash = enter_tenant.key_hash and k.revoked_at is null;
    if found is null then
        return null;
    end if;
    perform set_config('tortus.tenant', found, true);
    perform set_config('tortus.key_hash', enter_tenant.key_hash, true);  -- whose groups apply (tortus.caller_groups)
    perform set_config('tortus.tenant_proof', tortus.tenant_proof(found || ':' || enter_tenant.key_hash), true);
    return found;
end
$$;

comment on function tortus.enter_tenant(text) is
'Scope this transaction to the tenant of a valid, unrevoked API key given by its SHA-256 (hex), '
'and return it (NULL for no such key). The way a service login not bound to tenants enters one: '
'setting tortus.tenant by hand shows it nothing (tortus.tenant_allowed). The key''s groups then '
'limit which sources it reads (tortus.caller_groups).';

revoke all on function tortus.enter_tenant(text) from public;
grant execute on function tortus.enter_tenant(text) to tortus_app;
