/* Stands for oelibc: what the plug-in may take from the enclave's libc. */
typedef unsigned long size_t;
static int error_number;
void *memcpy(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}
void *memset(void *dst, int c, size_t n) {
  char *d = dst;
  while (n--) *d++ = (char)c;
  return dst;
}
size_t strlen(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return n;
}
int *__errno_location(void) { return &error_number; }
