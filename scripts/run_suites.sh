#!/usr/bin/env bash
# `make test`: the whole suite on SQLite, on PostgreSQL, and on PostgreSQL with hash-partitioned
# tables and prepared statements (server-side binding), side by side. Each run gets its own test
# database (per process) and its own Redis databases, so the Celery workers of one run never take
# another run's tasks. Each run's output goes to a log that is printed when it ends; the exit
# status is non-zero if any run failed.
set -u
PY=${PY:-.venv/bin/python}
PYTEST_ARGS=${PYTEST_ARGS:-}
SUITES=${SUITES:-"sqlite postgres postgres-partitioned"}
logs=$(mktemp -d)

redis_env() {  # e2e broker, fault-test broker, worker-kill broker
    printf 'AGENT_SESSIONS_E2E_REDIS_URL=redis://127.0.0.1:6379/%s AGENT_SESSIONS_FAULTS_REDIS_URL=redis://127.0.0.1:6379/%s AGENT_SESSIONS_FAULTS_WORKER_REDIS_URL=redis://127.0.0.1:6379/%s' "$1" "$2" "$3"
}

start() {
    local name=$1 vars=$2
    echo "== starting the $name run (log: $logs/$name.log)"
    ( env $vars "$PY" -m pytest $PYTEST_ARGS > "$logs/$name.log" 2>&1; echo $? > "$logs/$name.rc" ) &
}

for suite in $SUITES; do
    case $suite in
        sqlite) start sqlite "AGENT_SESSIONS_TEST_DB=sqlite $(redis_env 1 2 3)" ;;
        postgres) start postgres "AGENT_SESSIONS_TEST_DB=postgres $(redis_env 5 9 10)" ;;
        postgres-partitioned)
            start postgres-partitioned "AGENT_SESSIONS_TEST_DB=postgres AGENT_SESSIONS_TEST_PARTITIONS=16 AGENT_SESSIONS_TEST_SERVER_BINDING=1 $(redis_env 6 7 8)" ;;
        *) echo "unknown suite: $suite"; exit 2 ;;
    esac
done
wait

status=0
for suite in $SUITES; do
    rc=$(cat "$logs/$suite.rc" 2>/dev/null || echo 1)
    echo
    echo "==================== $suite run: exit status $rc ===================="
    if [ "$rc" = 0 ]; then tail -n 3 "$logs/$suite.log"; else cat "$logs/$suite.log"; status=1; fi
done
exit $status
