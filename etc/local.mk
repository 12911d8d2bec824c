# etc/local.mk
