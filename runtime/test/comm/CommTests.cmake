# Filled in by the communicator work.
