# Float64 emulation of the finish kernel's B9 pair sums: patch 0003's thread mapping (finish_pairs_once)
# against the element-by-element loops (finish_pairs_twice), for several valid-row counts n and
# column counts dn. Run: .venv/bin/python bench/pending/next-s20/check_pairs_once.py
import numpy as np, itertools
rng=np.random.default_rng(1)
def run(n, dn, sc=0.7):
    C=64; FT=16
    gs=np.zeros((64,FT)); ks=np.zeros((64,FT)); qs=np.zeros((64,FT)); betas=np.zeros(64)
    gs[:n,:dn]=-np.cumsum(rng.random((n,dn))*0.5,axis=0); ks[:n,:dn]=rng.standard_normal((n,dn)); qs[:n,:dn]=rng.standard_normal((n,dn)); betas[:n]=rng.random(n)
    dL=np.tril(rng.standard_normal((64,64)),-1); dA=np.tril(rng.standard_normal((64,64)))
    dL[n:,:]=0; dA[n:,:]=0
    # twice
    X1=np.zeros((64,FT)); Y1=np.zeros((64,FT)); Z1=np.zeros((64,FT))
    for r in range(64):
        for dd in range(FT):
            if not (r<n and dd<dn): continue
            gr=gs[r,dd]; I0=r&~15; jend=min(I0+15,n-1)
            for j in range(I0,r+1):
                ek=ks[j,dd]*np.exp(gr-gs[j,dd]); X1[r,dd]+=dL[r,j]*ek; Y1[r,dd]+=dA[r,j]*ek
            for j in range(r,jend+1):
                Z1[r,dd]+=(dL[j,r]*betas[j]*ks[j,dd]+dA[j,r]*sc*qs[j,dd])*np.exp(gs[j,dd]-gr)
    # once: emulate threads
    X2=np.zeros((64,FT)); Y2=np.zeros((64,FT)); Z2=np.zeros((64,FT))
    Zp={}  # (I0,dd,t) -> Z[16]
    for tid in range(256):
        t=tid&3; dd=(tid>>2)&15; I0=16*(tid>>6); col=dd<dn
        Z=np.zeros(16)
        for i in range(4):
            a=I0+t+4*i; live=col and a<n
            ga=gs[a,dd]; cb=betas[a]*ks[a,dd]; cq=sc*qs[a,dd]; x=y=0.0
            for bb in range(16):
                if live and bb<=t+4*i:
                    b=I0+bb; E=np.exp(ga-gs[b,dd]); dl=dL[a,b]; da=dA[a,b]; ek=ks[b,dd]*E
                    x+=dl*ek; y+=da*ek; Z[bb]+=(dl*cb+da*cq)*E
            X2[a,dd]=x; Y2[a,dd]=y
        Zp[(I0,dd,t)]=Z
    for tid in range(256):
        t=tid&3; dd=(tid>>2)&15; I0=16*(tid>>6)
        Zs=sum(Zp[(I0,dd,u)] for u in range(4))
        for i in range(4):
            r=I0+t+4*i
            if dd<dn and r<n: Z2[r,dd]=Zs[4*i+t]
    for nm,a,b in [('X',X1,X2),('Y',Y1,Y2),('Z',Z1,Z2)]:
        err=np.abs(a-b).max()/max(np.abs(a).max(),1e-30)
        assert err<1e-12, (nm,n,dn,err)
    return True
for n,dn in [(64,16),(40,16),(5,12),(64,7),(33,16),(17,3)]:
    run(n,dn)
print("emulation: once == twice for all cases")
