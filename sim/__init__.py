"""The world: time, jobs, nodes, VMs and money. Only this package advances time and spends money."""
