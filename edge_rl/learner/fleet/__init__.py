"""The fleet's control: statuses in, control and credit out (``FleetControl``), credit and
grants, one process per actor id, the join desk, and the quarantine of an outlying board."""
