-- Toroidal locality: distance on the flat torus [0, 2*pi)^2 and a locality-preserving shard map.
-- Functions written with a SQL-standard body (`return ...`) are bound when created, so they
-- need no pinned search_path, and the planner can inline them into queries.

-- Adding and subtracting 1 rounds differences below float precision at angle scale to
-- exactly 0: PostgreSQL raises an underflow error on arithmetic such as 1e-200 squared.
create or replace function tortus.angle_gap(a double precision, b double precision)
returns double precision
language sql immutable parallel safe
return (least(
    abs((a - b + 1.0) - 1.0) - 2 * pi() * floor(abs((a - b + 1.0) - 1.0) / (2 * pi())),
    2 * pi() - (abs((a - b + 1.0) - 1.0) - 2 * pi() * floor(abs((a - b + 1.0) - 1.0) / (2 * pi())))
) + 1.0) - 1.0;

comment on function tortus.angle_gap(double precision, double precision) is
'Shortest angular difference between two angles in radians, in [0, pi].';

create or replace function tortus.torus_distance(
    theta1 double precision, phi1 double precision,
    theta2 double precision, phi2 double precision
) returns double precision
language sql immutable parallel safe
return sqrt(tortus.angle_gap(theta1, theta2) * tortus.angle_gap(theta1, theta2)
          + tortus.angle_gap(phi1, phi2) * tortus.angle_gap(phi1, phi2));

comment on function tortus.torus_distance(double precision, double precision, double precision, double precision) is
'Geodesic distance between two points on the flat torus [0, 2*pi)^2: each angle difference wraps '
'around, so the result is in [0, pi*sqrt(2)]. Symmetric, wrap-invariant, obeys the triangle inequality.';

create or replace function tortus.shard_of(theta double precision, phi double precision, n_shards integer)
returns integer
language plpgsql immutable strict parallel safe
set search_path = pg_catalog, pg_temp
as $$
declare
    tau constant double precision := 2 * pi();
    rows_ integer;
    cols integer;
    t double precision := theta - tau * floor(theta / tau);
    p double precision := phi - tau * floor(phi / tau);
begin
    if n_shards < 1 then
        raise exception 'n_shards must be at least 1, got %', n_shards
            using errcode = '22023';
    end if;
    -- A rows x cols grid of torus cells with rows * cols = n_shards, as square as possible,
    -- so that nearby points share a shard and every shard covers one contiguous cell.
    rows_ := floor(sqrt(n_shards))::integer;
    while n_shards % rows_ <> 0 loop
        rows_ := rows_ - 1;
    end loop;
    cols := n_shards / rows_;
    return least(cols - 1, floor(t / tau * cols)::integer) * rows_
         + least(rows_ - 1, floor(p / tau * rows_)::integer);
end
$$;

comment on function tortus.shard_of(double precision, double precision, integer) is
'Locality-preserving shard (0 .. n_shards-1) of a torus point: the torus is cut into a grid of '
'n_shards contiguous cells (as square as n_shards allows) and the point''s cell is returned. '
'Angles are taken modulo 2*pi.';
