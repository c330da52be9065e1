#!/bin/sh
# ns-agent.sh - an ssh stand-in for ddlrun --ssh-agent in the tests: "ns-agent.sh HOST COMMAND..."
# runs COMMAND (one shell command, as ssh joins its words) in the network namespace that stands
# for HOST, with stdin passed through as ssh passes it. The hosts are given by NS_AGENT_HOSTS,
# "HOST=NAMESPACE ..." (e.g. "10.77.0.1=ddlca 10.77.0.2=ddlcb").
host=$1; shift
for pair in $NS_AGENT_HOSTS; do
    if [ "${pair%%=*}" = "$host" ]; then
        exec ip netns exec "${pair#*=}" sh -c "$*"
    fi
done
echo "ns-agent.sh: unknown host '$host' (not in NS_AGENT_HOSTS)" >&2
exit 255
