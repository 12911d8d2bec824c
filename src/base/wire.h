/* wire.h - little-endian fields of wire headers (base layer: the bootstrap,
 * the out-of-band service, the transports and the job key all use them). */
#ifndef LOOM_WIRE_H
#define LOOM_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* Little-endian field codecs for wire headers: one unaligned load or store
 * each (memcpy plus a byte swap on big-endian hosts), not a byte loop. */
static inline void loom_put_le16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, sizeof v);
}
static inline void loom_put_le32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof v);
}
static inline void loom_put_le64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof v);
}
static inline uint16_t loom_get_le16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return le16toh(v);
}
static inline uint32_t loom_get_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return le32toh(v);
}
static inline uint64_t loom_get_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

#endif
