# Sourced by the multi-host tests (two_hosts.sh, slurm_test.sh): two network namespaces joined by a
# veth pair, the stand-in for two hosts on one machine. Traffic stays between them.
#
#   netns_pair NS1 NS2 IP1 IP2 TAG   # TAG names the veth ends ("${TAG}v1" in NS1, "${TAG}v2" in NS2)
# The caller removes the namespaces (ip netns del), which removes the pair with them.
netns_pair() {
  local h1=$1 h2=$2 ip1=$3 ip2=$4 tag=$5
  ip netns add "$h1" && ip netns add "$h2"
  ip link add "${tag}v1" type veth peer name "${tag}v2"
  ip link set "${tag}v1" netns "$h1" && ip link set "${tag}v2" netns "$h2"
  ip netns exec "$h1" ip addr add "$ip1/24" dev "${tag}v1"
  ip netns exec "$h2" ip addr add "$ip2/24" dev "${tag}v2"
  for ns in "$h1" "$h2"; do ip netns exec "$ns" ip link set lo up; done
  ip netns exec "$h1" ip link set "${tag}v1" up && ip netns exec "$h2" ip link set "${tag}v2" up
}
