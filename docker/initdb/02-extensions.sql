-- First start only: install the extensions in database tortus as the superuser, the way an
-- administrator runs CREATE EXTENSION once on a managed service. tortus-pg itself never
-- needs superuser rights afterwards.
\connect tortus

create extension if not exists vector;

-- Apache AGE is optional: install it when the image provides it (postgres.Dockerfile
-- builds it and preloads it with shared_preload_libraries=age).
select exists (select 1 from pg_available_extensions where name = 'age') as have_age \gset
\if :have_age
create extension if not exists age;
-- Cypher functions and the graph catalog live in schema ag_catalog.
grant usage on schema ag_catalog to tortus_owner;
\endif
