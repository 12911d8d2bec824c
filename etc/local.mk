# etc/local.mk: example rank tables, installed to $(datadir)/loom/ranktables.
ranktablesdir = $(datadir)/loom/ranktables
dist_ranktables_DATA = \
	etc/ranktables/single-1.json \
	etc/ranktables/single-4.json \
	etc/ranktables/single-8.json \
	etc/ranktables/two-server.json \
	etc/ranktables/superpod-1.2.json \
	etc/ranktables/two-server-2.0.json
