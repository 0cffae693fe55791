"""Servers drtool starts and supervises itself: a detached process with a state folder, a health check and
client settings (``component.Component``, ``process``), and the two that production features run: an etcd
member serving a restored data directory (the etcd plugin's ``start: true``, a point-in-time restore's replay
member) and a throwaway OpenBao for the Vault plugin's trial restore. Certificates for servers that speak TLS
come from ``pki``; ``provision`` says where each program comes from (``drtool lab doctor``).

The lab's servers build on the same base; nothing here imports the lab (drtool/layers.py).
"""
