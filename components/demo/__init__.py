"""demo: the data the bundled demo runs on — a shop assistant's logs with a drift — generated from a seed."""
