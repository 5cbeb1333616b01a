"""Evaluation results keep the question's text and, for strategies that answer, their reply.

A row of `tortus.eval_result` held the metrics of a reply but not the reply: seeing why a
question missed meant asking it again over the same snapshot. `question` is the text asked;
`reply` the answer, its short answer, whether and why it was withheld and a withheld answer's
draft (null for strategies that only retrieve). Rows of earlier runs keep nulls. The view
`tortus.eval_reply` reads them with the metrics that score them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


# Defined here rather than in sql/, which is re-applied after a downgrade to any revision: a view
# is checked against its table's columns when it is made.
VIEW = """
create view tortus.eval_reply with (security_invoker = true) as
select r.tenant_id, r.run_id, r.dataset, e.question_id, e.question, e.strategy,
       (e.reply ->> 'withheld')::boolean as withheld,
       e.reply ->> 'refusal' as refusal,
       e.reply ->> 'answer' as answer,
       e.reply ->> 'short_answer' as short_answer,
       e.reply ->> 'draft' as draft,
       (e.metrics ->> 'answer_match')::double precision as answer_match,
       (e.metrics ->> 'reply_match')::double precision as reply_match,
       (e.metrics ->> 'support')::double precision as support
from tortus.eval_run r
join tortus.eval_result e on e.tenant_id = r.tenant_id and e.run_id = r.run_id
where e.reply is not null;

comment on view tortus.eval_reply is
'One row per evaluation run, question and strategy that answers: the question asked, whether the '
'reply was withheld and why (the refusal), the answer, its short answer, a withheld answer''s draft, '
'and the metrics that score them (answer_match, reply_match, support; null for negatives). Reads '
'tortus.eval_run and tortus.eval_result as the caller, under their row-level security.';

grant select on tortus.eval_reply to tortus_app, tortus_analyst;
"""


def upgrade() -> None:
    op.execute("alter table tortus.eval_result add column question text, add column reply jsonb "
               "check (reply is null or jsonb_typeof(reply) = 'object')")
    op.execute(VIEW)


def downgrade() -> None:
    op.execute("drop view tortus.eval_reply")
    op.execute("alter table tortus.eval_result drop column reply, drop column question")
