#!/usr/bin/env python3
# The public surface of pantheon-engine, counted from rustdoc output (items reachable from lib.rs):
#   cargo doc -p pantheon-engine --no-deps && python3 scripts/engine-surface.py [-v]
# inherent methods (on the pages of structs and enums, outside trait implementations).
import os,re,sys
d=next((a for a in sys.argv[1:] if not a.startswith('-')), 'target/doc/pantheon_engine')
allh=open(os.path.join(d,'all.html')).read()
items=re.findall(r'<li><a href="([^"]+)">',allh)
kinds={}
for h in items:
    k=os.path.basename(h).split('.')[0]
    kinds[k]=kinds.get(k,0)+1
methods=0
per=[]
for h in items:
    k=os.path.basename(h).split('.')[0]
    if k not in ('struct','enum','trait'): continue
    page=open(os.path.join(d,h)).read()
    i=page.find('id="implementations-list"')
    if i<0: continue
    j=min([x for x in (page.find('id="trait-implementations',i),page.find('id="synthetic-implementations',i),page.find('id="blanket-implementations',i)) if x>0] or [len(page)])
    n=len(set(re.findall(r'id="method\.([a-z0-9_]+)"',page[i:j])))
    methods+=n; per.append((n,h))
fns=kinds.get('fn',0)
print('items in all.html:',len(items),kinds)
print('free pub fn:',fns,' pub inherent methods:',methods,' pub fn total:',fns+methods)
if '-v' in sys.argv:
    for n,h in sorted(per,reverse=True)[:15]: print(n,h)
