module edge-ccm/test/differential/csr-reader

go 1.24
