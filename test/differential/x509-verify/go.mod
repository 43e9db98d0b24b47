module edge-ccm/test/differential/x509-verify

go 1.26
