"""Put on the PYTHONPATH of the servers `engines` starts, for its sitecustomize.py."""
