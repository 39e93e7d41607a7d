import sys, statistics, collections
d = collections.defaultdict(list); p = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0] != 'R': continue
    k = (f[2], f[3], f[1]); d[k].append(float(f[4])); p[k].append(int(f[5]))
for k in sorted(d, key=lambda k: (int(k[0]), k[1], k[2])):
    print('%3s %-8s %-14s ms %7.2f (min %6.2f) peak %.2f MiB' % (k[0], k[1], k[2], statistics.median(d[k]), min(d[k]), statistics.median(p[k]) / 2**20))
