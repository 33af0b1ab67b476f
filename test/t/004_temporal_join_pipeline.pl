# A temporal-join pipeline run by the background worker: orders enriched
# with the rate valid at their time, read from both tables' change streams
# through one slot.  Across killed workers and immediate stops at every
# point of a step, the sink equals the one-shot answer over the same rows:
# nothing lost, nothing doubled.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PtfNode;
use PtfPipelineTest;

my $node = ptf_node('temporal_join', q{
ptf.pipeline_idle_time = 50ms
ptf.pipeline_max_backoff = 2s
ptf.pipeline_batch_size = 300
});

# Every change takes its time from one clock, so no row is ever late and
# each side's watermark is its greatest time.  rate_history records every
# version a rate had (inserts and updates), the one-shot answer's history.
$node->safe_psql('postgres', q{
    CREATE EXTENSION deduplicate_keep_first;
    CREATE SEQUENCE clock;
    CREATE FUNCTION tick() RETURNS timestamptz LANGUAGE sql
        AS $$SELECT timestamptz '2024-01-01 00:00+00' + nextval('clock') * interval '1 ms'$$;
    CREATE TABLE orders (id bigserial PRIMARY KEY, cur int, amount int, ts timestamptz);
    CREATE TABLE rates (cur int PRIMARY KEY, rate int, ts timestamptz);
    ALTER TABLE rates REPLICA IDENTITY FULL;
    CREATE TABLE rate_history (cur int, rate int, ts timestamptz);
    CREATE FUNCTION track() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO rate_history VALUES (NEW.cur, NEW.rate, NEW.ts);
        RETURN NULL;
    END $$;
    CREATE TRIGGER track AFTER INSERT OR UPDATE ON rates FOR EACH ROW EXECUTE FUNCTION track();
    CREATE TABLE enriched (id bigint, cur int, amount int, ts timestamptz, rate int, rate_ts timestamptz);

    SELECT ptf.create_pipeline('enrich', $q$
        SELECT (probe).id, (probe).cur, (probe).amount, (probe).ts, (build).rate, (build).ts
          FROM ptf.temporal_join(NULL::orders, NULL::rates, probe_time => 'ts', build_time => 'ts',
                                 probe_key => '{cur}', join_type => 'left',
                                 changes => true, uid => 'enrich')$q$, 'enriched');
});

my $batch = 0;

# A batch in several transactions: new and changed rates, orders of known
# and unknown currencies, and order changes the join passes over.
sub write_batch
{
    $batch++;
    for my $t (1 .. 4)
    {
        $node->safe_psql('postgres', qq{
            INSERT INTO rates SELECT g, $batch * 100 + $t, tick()
              FROM generate_series($batch * 3 + $t, $batch * 3 + $t + 2) g
                ON CONFLICT (cur) DO UPDATE SET rate = EXCLUDED.rate, ts = EXCLUDED.ts;
            INSERT INTO orders (cur, amount, ts)
            SELECT (hashint4(g * $batch * $t) & 2147483647) % 40, g, tick()
              FROM generate_series(1, 120) g;
            UPDATE rates SET rate = rate + 1, ts = tick() WHERE cur % 5 = $t;
            UPDATE orders SET amount = amount + 1 WHERE id % 97 = $t;
        });
    }
}

# the orders the join watermark has passed, each with the newest version at
# or below its time
my $expected = q{
    WITH wm AS (SELECT least((SELECT max(ts) FROM orders), (SELECT max(ts) FROM rate_history)) AS wm),
    answer AS (
        SELECT o.id, o.cur, o.amount, o.ts, v.rate, v.ts AS rate_ts
          FROM orders o CROSS JOIN wm
          LEFT JOIN LATERAL (SELECT * FROM rate_history h WHERE h.cur = o.cur AND h.ts <= o.ts
                              ORDER BY h.ts DESC LIMIT 1) v ON true
         WHERE o.ts <= wm.wm)
    SELECT count(*) FROM ((TABLE answer EXCEPT ALL TABLE enriched)
                          UNION ALL (TABLE enriched EXCEPT ALL TABLE answer)) d};

# amounts of updated orders changed after they were joined: the sink keeps
# what was joined, so compare with the amounts as inserted
$node->safe_psql('postgres', q{
    CREATE TABLE first_amount (id bigint PRIMARY KEY, amount int);
    CREATE FUNCTION keep_amount() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO first_amount VALUES (NEW.id, NEW.amount);
        RETURN NULL;
    END $$;
    CREATE TRIGGER keep_amount AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION keep_amount();
});
$expected =~ s/SELECT o\.id, o\.cur, o\.amount/SELECT o.id, o.cur, (SELECT amount FROM first_amount f WHERE f.id = o.id)/;

sub check
{
    my ($label) = @_;
    ok($node->poll_query_until('postgres', $expected, '0'),
        "$label: the sink equals the one-shot answer");
    slots_not_ahead($node, $label);
}

write_batch();
check('steady');

survive_kills($node, \&write_batch, \&check);

cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM enriched'), '>', 3000,
    'many orders enriched');
cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM enriched WHERE rate IS NULL'), '>', 0,
    'orders before any rate are padded');
is($node->safe_psql('postgres', q{
    SELECT rows_late = 0 AND rows_skipped > 0 FROM ptf.pipeline_status WHERE name = 'enrich'}),
    't', 'nothing late; order updates counted as skipped');

$node->stop;
done_testing();
