"""HTTP surface of tortus-pg (REST, GraphQL, dashboard), installed as tortus_pg.api."""
