
abc/data/x.fits" (08J1