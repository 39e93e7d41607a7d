import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0] != 'B': continue
    kv = dict(x.split('=') for x in f[3:])
    d[(f[2], f[1])].append((float(kv['ecalls_per_s']), int(kv['peak_footprint_bytes']) / int(kv['peak_live_bytes']), int(kv['nulls'])))
for k in sorted(d):
    v = d[k]
    print('%-10s %-18s ecalls/s med %8.0f  fp/live med %.3f  (%s) nulls %d' % (k[0], k[1], statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), ' '.join('%.3f' % x[1] for x in v), sum(x[2] for x in v)))
