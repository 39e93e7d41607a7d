/* tb_x509: X.509 certificate chain verification with mbedtls (workload "x509").
 *
 * Set-up (untimed): a certificate chain made with mbedtls itself -- a root
 * CA, --size intermediate CAs (1) and a leaf, each with its own EC P-256
 * key, signed with ECDSA-SHA256 -- written as DER and, leaf first, as one
 * PEM chain. The keys come from a CTR_DRBG seeded from --seed alone, so a
 * seed always gives the same chain (test keys, never real ones).
 *
 * Timed, per thread and iteration (one op): mbedtls_x509_crt_init, parse
 * the presented chain (leaf and intermediates; PEM in one call, or with
 * --der one DER certificate per call), check it, verify it against the
 * root with mbedtls_x509_crt_verify_with_profile, mbedtls_x509_crt_free.
 * This is what a TLS client or an attestation verifier does per peer, and
 * nearly all of it is small allocations: ASN.1 name lists, big numbers,
 * EC points and the comb tables of every signature check.
 *
 * The trusted root is parsed by each thread once, before its loop (or with
 * --reparse-ca in every iteration, like a verifier that loads its trust
 * store per connection). Not shared between threads: the first signature
 * check with a key caches a precomputed table in that key's EC group
 * (MBEDTLS_ECP_FIXED_POINT_OPTIM), which is a write, unlocked. Verification
 * itself takes no RNG; the set-up's CTR_DRBG is used by the main thread
 * only.
 *
 * Self-check, every iteration: after parsing, every parsed certificate's
 * raw DER equals the generated one (memcmp) and the leaf's subject reads
 * back as written; after verifying, the result is 0 with no flags. The
 * parse is checked before the signatures are, so that a wrong allocator is
 * caught as a failed check rather than as a crash in the EC arithmetic.
 * The chain is verified once at set-up too. (mbedtls reports a failed
 * allocation inside a signature check as a bad signature: in a heap too
 * small the run fails its check either way.) */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/bignum.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/error.h>
#include <mbedtls/pem.h>
#include <mbedtls/pk.h>
#include <mbedtls/version.h>
#include <mbedtls/x509.h>
#include <mbedtls/x509_crt.h>

#include "wl.h"

#if MBEDTLS_VERSION_MAJOR != 2
#error "tb_x509 is written against the mbedtls 2.x API (2.28)"
#endif

/* Calibrated on the 2-CPU development machine: about 1 s at 1 thread with
 * one intermediate (PEM, root parsed once). */
#define DEFAULT_ITERATIONS 330
#define MAX_INTERMEDIATES (MBEDTLS_X509_MAX_INTERMEDIATE_CA)
#define MAX_CERTS (MAX_INTERMEDIATES + 2) /* root, intermediates, leaf */
#define DER_MAX 2048                      /* one P-256 certificate is ~500 bytes */

#define LEAF_CN "leaf.tessbench.test"
#define LEAF_NAME "CN=" LEAF_CN ",O=tessbench,C=NL"
/* The leaf's subject as mbedtls_x509_dn_gets prints it: written out here,
 * not derived from a parse, so that a parse gone wrong cannot agree. */
#define LEAF_DN "CN=" LEAF_CN ", O=tessbench, C=NL"

/* the iteration number of the untimed check at set-up */
#define SETUP_CHECK UINT64_MAX

#define NOT_BEFORE "20200101000000"
#define NOT_AFTER "20491231235959"

/* Only what the chain is made of: SHA-256, ECDSA, P-256. A certificate
 * with anything else (a corrupted algorithm identifier) is flagged. */
static const mbedtls_x509_crt_profile verify_profile = {
    MBEDTLS_X509_ID_FLAG(MBEDTLS_MD_SHA256),
    MBEDTLS_X509_ID_FLAG(MBEDTLS_PK_ECDSA) | MBEDTLS_X509_ID_FLAG(MBEDTLS_PK_ECKEY),
    MBEDTLS_X509_ID_FLAG(MBEDTLS_ECP_DP_SECP256R1),
    2048,
};

typedef struct cert_s {
  unsigned char *der;
  size_t der_len;
} cert_t;

typedef struct bench_s {
  wl_args_t args;
  bool reparse_ca;
  bool der;
  int intermediates;
  /* certs[0] is the root, certs[1..intermediates] the intermediates (each
   * signed by the one before), certs[intermediates + 1] the leaf. */
  cert_t certs[MAX_CERTS];
  int ncerts;
  char *pem_chain; /* leaf first, then the intermediates, nearest first */
  size_t pem_len;  /* with the terminating NUL, as mbedtls_x509_crt_parse wants */
  uint64_t *ops;   /* per thread */
} bench_t;

/* ------------------------------------------------------------- helpers */

static const char *mbed_error(int ret, char *buf, size_t size) {
  mbedtls_strerror(ret, buf, size);
  return buf;
}

static void check_mbed(int ret, const char *what) {
  if (ret != 0) {
    char buf[128];
    wl_fail("set-up: %s: -0x%04x %s", what, (unsigned)-ret, mbed_error(ret, buf, sizeof buf));
  }
}

/* The CTR_DRBG's "entropy": the seed's PRNG stream. Deterministic on
 * purpose -- the same --seed gives the same keys and certificates. */
static int seed_entropy(void *ctx, unsigned char *out, size_t len) {
  wl_rng_t *rng = ctx;
  while (len > 0) {
    uint64_t v = wl_rand(rng);
    size_t n = len < sizeof v ? len : sizeof v;
    memcpy(out, &v, n);
    out += n;
    len -= n;
  }
  return 0;
}

/* ------------------------------------------------------------- set-up */

static void gen_key(mbedtls_pk_context *key, mbedtls_ctr_drbg_context *drbg) {
  mbedtls_pk_init(key);
  check_mbed(mbedtls_pk_setup(key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)), "pk_setup");
  check_mbed(mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*key),
                                 mbedtls_ctr_drbg_random, drbg),
             "ecp_gen_key");
}

/* Writes the certificate of `subject_key` named `subject`, signed by
 * `issuer_key` named `issuer`, into *out (DER, malloc'd). */
static void write_cert(cert_t *out, const char *subject, mbedtls_pk_context *subject_key,
                       const char *issuer, mbedtls_pk_context *issuer_key, int serial, bool ca,
                       mbedtls_ctr_drbg_context *drbg) {
  mbedtls_x509write_cert w;
  mbedtls_x509write_crt_init(&w);
  mbedtls_x509write_crt_set_version(&w, MBEDTLS_X509_CRT_VERSION_3);
  mbedtls_x509write_crt_set_md_alg(&w, MBEDTLS_MD_SHA256);
  mbedtls_x509write_crt_set_subject_key(&w, subject_key);
  mbedtls_x509write_crt_set_issuer_key(&w, issuer_key);
  check_mbed(mbedtls_x509write_crt_set_subject_name(&w, subject), "set_subject_name");
  check_mbed(mbedtls_x509write_crt_set_issuer_name(&w, issuer), "set_issuer_name");
  mbedtls_mpi sn;
  mbedtls_mpi_init(&sn);
  check_mbed(mbedtls_mpi_lset(&sn, serial), "mpi_lset");
  check_mbed(mbedtls_x509write_crt_set_serial(&w, &sn), "set_serial");
  mbedtls_mpi_free(&sn);
  check_mbed(mbedtls_x509write_crt_set_validity(&w, NOT_BEFORE, NOT_AFTER), "set_validity");
  check_mbed(mbedtls_x509write_crt_set_basic_constraints(&w, ca, -1), "set_basic_constraints");
  check_mbed(mbedtls_x509write_crt_set_key_usage(
                 &w, ca ? MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN
                        : MBEDTLS_X509_KU_DIGITAL_SIGNATURE),
             "set_key_usage");
  check_mbed(mbedtls_x509write_crt_set_subject_key_identifier(&w), "set_subject_key_identifier");
  check_mbed(mbedtls_x509write_crt_set_authority_key_identifier(&w),
             "set_authority_key_identifier");
  unsigned char buf[DER_MAX];
  /* the DER is written at the end of buf */
  int len = mbedtls_x509write_crt_der(&w, buf, sizeof buf, mbedtls_ctr_drbg_random, drbg);
  if (len < 0) check_mbed(len, "x509write_crt_der");
  out->der_len = (size_t)len;
  out->der = wl_xmalloc(out->der_len);
  memcpy(out->der, buf + sizeof buf - out->der_len, out->der_len);
  mbedtls_x509write_crt_free(&w);
}

static void make_chain(bench_t *b) {
  wl_rng_t rng;
  wl_rng_seed(&rng, b->args.seed, 0x509);
  mbedtls_ctr_drbg_context drbg;
  mbedtls_ctr_drbg_init(&drbg);
  static const unsigned char personal[] = "tessbench x509";
  check_mbed(mbedtls_ctr_drbg_seed(&drbg, seed_entropy, &rng, personal, sizeof personal - 1),
             "ctr_drbg_seed");

  b->ncerts = b->intermediates + 2;
  mbedtls_pk_context keys[MAX_CERTS];
  char names[MAX_CERTS][96];
  for (int k = 0; k < b->ncerts; k++) {
    gen_key(&keys[k], &drbg);
    if (k == 0) {
      snprintf(names[k], sizeof names[k], "CN=tessbench root CA,O=tessbench,C=NL");
    } else if (k == b->ncerts - 1) {
      snprintf(names[k], sizeof names[k], "%s", LEAF_NAME);
    } else {
      snprintf(names[k], sizeof names[k], "CN=tessbench intermediate CA %d,O=tessbench,C=NL", k);
    }
    /* the root signs itself, every other certificate is signed by the one
     * before it */
    int issuer = k == 0 ? 0 : k - 1;
    write_cert(&b->certs[k], names[k], &keys[k], names[issuer], &keys[issuer], k + 1,
               k != b->ncerts - 1, &drbg);
  }
  for (int k = 0; k < b->ncerts; k++) mbedtls_pk_free(&keys[k]);
  mbedtls_ctr_drbg_free(&drbg);

  /* The presented chain, as a server sends it: leaf, then up to (not
   * including) the root. */
  size_t cap = 1;
  for (int k = 1; k < b->ncerts; k++) cap += b->certs[k].der_len * 2 + 128;
  b->pem_chain = wl_xmalloc(cap);
  size_t used = 0;
  for (int k = b->ncerts - 1; k >= 1; k--) {
    size_t olen = 0;
    check_mbed(mbedtls_pem_write_buffer("-----BEGIN CERTIFICATE-----\n",
                                        "-----END CERTIFICATE-----\n", b->certs[k].der,
                                        b->certs[k].der_len, (unsigned char *)b->pem_chain + used,
                                        cap - used, &olen),
               "pem_write_buffer");
    used += olen - 1; /* olen counts the NUL, which the next one overwrites */
  }
  b->pem_len = used + 1;
}

static void free_chain(bench_t *b) {
  for (int k = 0; k < b->ncerts; k++) free(b->certs[k].der);
  free(b->pem_chain);
}

/* ------------------------------------------------------------ the work */

static void parse_root(const bench_t *b, mbedtls_x509_crt *root) {
  mbedtls_x509_crt_init(root);
  int ret = mbedtls_x509_crt_parse_der(root, b->certs[0].der, b->certs[0].der_len);
  if (ret != 0) {
    char buf[128];
    wl_fail("parsing the root: -0x%04x %s", (unsigned)-ret, mbed_error(ret, buf, sizeof buf));
  }
  if (root->raw.len != b->certs[0].der_len ||
      memcmp(root->raw.p, b->certs[0].der, root->raw.len) != 0) {
    wl_fail("the parsed root differs from the generated one");
  }
}

/* Parses the presented chain into *chain and checks it against what was
 * generated; `where` names the iteration in messages. */
static void parse_chain(const bench_t *b, mbedtls_x509_crt *chain, const char *where) {
  int ret = 0;
  if (b->der) {
    for (int k = b->ncerts - 1; k >= 1 && ret == 0; k--) {
      ret = mbedtls_x509_crt_parse_der(chain, b->certs[k].der, b->certs[k].der_len);
    }
  } else {
    ret = mbedtls_x509_crt_parse(chain, (const unsigned char *)b->pem_chain, b->pem_len);
  }
  if (ret != 0) {
    char buf[128];
    wl_fail("%s: parsing the chain: %s%d %s", where, ret < 0 ? "-" : "", ret < 0 ? -ret : ret,
            ret < 0 ? mbed_error(ret, buf, sizeof buf) : "certificates failed");
  }
  const mbedtls_x509_crt *crt = chain;
  for (int k = b->ncerts - 1; k >= 1; k--, crt = crt->next) {
    if (crt == NULL) wl_fail("%s: the parsed chain is short", where);
    if (crt->raw.len != b->certs[k].der_len || crt->raw.p == NULL ||
        memcmp(crt->raw.p, b->certs[k].der, crt->raw.len) != 0) {
      wl_fail("%s: certificate %d of the parsed chain differs from the generated one", where,
              b->ncerts - 1 - k);
    }
  }
  if (crt != NULL) wl_fail("%s: the parsed chain is too long", where);
  char dn[256];
  ret = mbedtls_x509_dn_gets(dn, sizeof dn, &chain->subject);
  if (ret < 0 || strcmp(dn, LEAF_DN) != 0) {
    wl_fail("%s: the leaf's subject reads '%s', not '%s'", where, ret < 0 ? "(error)" : dn,
            LEAF_DN);
  }
}

static void verify_once(const bench_t *b, mbedtls_x509_crt *root, uint64_t iteration) {
  char where[48] = "set-up";
  if (iteration != SETUP_CHECK) snprintf(where, sizeof where, "iteration %" PRIu64, iteration);
  mbedtls_x509_crt chain;
  mbedtls_x509_crt_init(&chain);
  parse_chain(b, &chain, where);
  uint32_t flags = UINT32_MAX;
  int ret = mbedtls_x509_crt_verify_with_profile(&chain, root, NULL, &verify_profile, LEAF_CN,
                                                 &flags, NULL, NULL);
  if (ret != 0 || flags != 0) {
    char info[512] = "";
    if (flags != 0) mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
    char *nl;
    while ((nl = strchr(info, '\n')) != NULL) *nl = ';';
    wl_fail("%s: verification returned -0x%04x, flags 0x%08x %s", where, (unsigned)-ret,
            (unsigned)flags, info);
  }
  mbedtls_x509_crt_free(&chain);
}

static bool loop_done(const wl_args_t *args, uint64_t i, double start) {
  /* an iteration takes milliseconds: the clock is cheap next to it */
  if (args->duration > 0) return wl_now() - start >= args->duration;
  return i >= args->iterations;
}

static void worker(int index, void *ctx) {
  bench_t *b = ctx;
  mbedtls_x509_crt root;
  if (!b->reparse_ca) parse_root(b, &root);
  double start = wl_now();
  uint64_t i = 0;
  for (; !loop_done(&b->args, i, start); i++) {
    if (b->reparse_ca) parse_root(b, &root);
    verify_once(b, &root, i);
    if (b->reparse_ca) mbedtls_x509_crt_free(&root);
  }
  if (!b->reparse_ca) mbedtls_x509_crt_free(&root);
  b->ops[index] = i;
}

int main(int argc, char **argv) {
  static bench_t b;
  b.args = (wl_args_t){.name = "x509", .threads = 1, .size = 1, .iterations = DEFAULT_ITERATIONS,
                       .seed = 1};
  const wl_option_t extra[] = {
      {"reparse-ca", WL_OPT_FLAG, &b.reparse_ca,
       "parse the trusted root in every iteration (default: once per thread)"},
      {"der", WL_OPT_FLAG, &b.der,
       "parse the chain as DER, one certificate per call (default: PEM, one call)"},
      {NULL, WL_OPT_FLAG, NULL, NULL},
  };
  wl_parse(argc, argv, &b.args, extra,
           "Per thread and iteration: parse a leaf + intermediate CA chain (mbedtls), verify it\n"
           "against a root CA (ECDSA P-256, SHA-256), free it. --size: intermediate CAs (1-8).");
  if (b.args.size < 1 || b.args.size > MAX_INTERMEDIATES) {
    fprintf(stderr, "tb_x509: --size must be 1 to %d intermediate CAs (try --help)\n",
            MAX_INTERMEDIATES);
    return WL_EXIT_USAGE;
  }
  b.intermediates = (int)b.args.size;

  make_chain(&b);
  /* the chain must verify before anything is timed */
  mbedtls_x509_crt root;
  parse_root(&b, &root);
  verify_once(&b, &root, SETUP_CHECK);
  mbedtls_x509_crt_free(&root);

  b.ops = wl_xmalloc(sizeof *b.ops * (size_t)b.args.threads);
  double elapsed = wl_run_threads(b.args.threads, worker, &b);
  uint64_t ops = 0;
  for (int t = 0; t < b.args.threads; t++) ops += b.ops[t];
  size_t chain_bytes = b.pem_len - 1;
  if (b.der) {
    chain_bytes = 0;
    for (int k = 1; k < b.ncerts; k++) chain_bytes += b.certs[k].der_len;
  }
  wl_result(&b.args, ops, elapsed, "intermediates=%d format=%s ca=%s chain_bytes=%zu",
            b.intermediates, b.der ? "der" : "pem", b.reparse_ca ? "per-iteration" : "per-thread",
            chain_bytes);
  free(b.ops);
  free_chain(&b);
  return 0;
}
